// Package brokerprobe is the data-path check's probe: the program that `fluxfed member add` runs
// in a pod on a member (`/fluxfed member probe HOST:PORT...` in the manager's image) greets lead
// broker endpoints as the hub does and reports, one line each, whether a Flux broker answered.
// Both fluxfed and fluxfed-manager, the binary of the image, run it.
package brokerprobe

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxfed/fluxfed/hub/probe"
)

// Timeout bounds the greeting of one endpoint.
const Timeout = 5 * time.Second

// terminationLog is where a container's program writes what its pod's status carries back.
const terminationLog = "/dev/termination-log"

// Probe greets every endpoint (HOST:PORT) as the hub greets a lead broker, writes one line per
// endpoint to w, and returns an error naming those that did not answer as a Flux broker.
func Probe(ctx context.Context, endpoints []string, w io.Writer) error {
	var failed []string
	for _, e := range endpoints {
		host, port, err := SplitEndpoint(e)
		if err == nil {
			gctx, cancel := context.WithTimeout(ctx, Timeout)
			err = probe.Greet(gctx, host, port)
			cancel()
		}
		if err != nil {
			failed = append(failed, e)
			fmt.Fprintf(w, "%s: no Flux broker answers from the member: %v\n", e, err)
			continue
		}
		fmt.Fprintf(w, "%s: answers as a Flux broker (ZMTP, CURVE)\n", e)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d endpoints did not answer as a Flux broker: %s", len(failed), len(endpoints), strings.Join(failed, ", "))
	}
	return nil
}

// ProbeAndRecord runs Probe and also writes its report where the pod's status carries it back
// (the container's termination message), when that file exists.
func ProbeAndRecord(ctx context.Context, endpoints []string, w io.Writer) error {
	var report strings.Builder
	err := Probe(ctx, endpoints, io.MultiWriter(w, &report))
	if f, openErr := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0); openErr == nil {
		_, _ = f.WriteString(report.String())
		_ = f.Close()
	}
	return err
}

// SplitEndpoint returns the host and the TCP port of HOST:PORT.
func SplitEndpoint(e string) (string, int32, error) {
	host, p, err := net.SplitHostPort(e)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not HOST:PORT: %w", e, err)
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not a TCP port (1-65535)", e, p)
	}
	return host, int32(port), nil
}
