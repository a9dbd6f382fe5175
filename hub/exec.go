package hub

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// Exec runs argv in a container of a pod of the hub's cluster, as kubectl exec does, and
// returns what it wrote to its standard output. An error carries the start of its standard
// error.
type Exec func(ctx context.Context, namespace, pod, container string, argv []string) ([]byte, error)

// ExecStream runs argv in a container as Exec does, but writes its standard output to stdout
// as it comes, and returns only when the command ends or ctx is done: the hub leaves the
// follower of a root's Flux instance running this way (fluxstream.go).
type ExecStream func(ctx context.Context, namespace, pod, container string, argv []string, stdout io.Writer) error

// NewExec returns the Exec of the pods/exec subresource of the API server at cfg: WebSocket,
// falling back to SPDY for API servers that do not speak it.
func NewExec(cfg *rest.Config) (Exec, error) {
	stream, err := NewExecStream(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, namespace, pod, container string, argv []string) ([]byte, error) {
		stdout := limitedBuffer{limit: 8 << 20}
		err := stream(ctx, namespace, pod, container, argv, &stdout)
		return stdout.Bytes(), err
	}, nil
}

// NewExecStream returns the ExecStream of the pods/exec subresource of the API server at cfg,
// as NewExec's.
func NewExecStream(cfg *rest.Config) (ExecStream, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, namespace, pod, container string, argv []string, stdout io.Writer) error {
		req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if err != nil {
			return err
		}
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			return err
		}
		// As kubectl: SPDY only when the API server (or a proxy) cannot upgrade to WebSocket.
		exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			return err
		}
		stderr := limitedBuffer{limit: 4 << 10}
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: &stderr})
		if err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return fmt.Errorf("%w: %s", err, msg)
			}
			return err
		}
		return nil
	}, nil
}

// limitedBuffer keeps the first limit bytes written to it and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
