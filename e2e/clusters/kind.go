package clusters

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// EnvKindImage names the environment variable that picks the node image of kind clusters (kind's
// --image); empty means kind's default for its version.
const EnvKindImage = "FLUXFED_E2E_KIND_IMAGE"

// kindDeleteTimeout bounds `kind delete cluster`, which only removes containers.
const kindDeleteTimeout = 5 * time.Minute

// kindProvider runs each cluster with the kind CLI. It needs a Docker engine.
type kindProvider struct {
	kind   string
	image  string
	nodes  int
	suffix string
	// beforeControllers is Options.BeforeControllers; kind's controllers already run.
	beforeControllers func(ctx context.Context, c *Cluster, cfg *rest.Config) error
}

func (k *kindProvider) prepare(opts Options) error {
	k.beforeControllers = opts.BeforeControllers
	kind, err := exec.LookPath("kind")
	if err != nil {
		return fmt.Errorf("the kind provider needs the kind CLI on PATH (go install sigs.k8s.io/kind@latest) and a Docker engine: %w", err)
	}
	// kind cluster names are global on the Docker host; the suffix keeps two runs apart.
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	k.kind, k.image, k.nodes, k.suffix = kind, os.Getenv(EnvKindImage), opts.NodesPerCluster, hex.EncodeToString(b[:])
	return nil
}

// kindClusterName is the name of the kind cluster for cluster name. kind names node containers
// <cluster>-control-plane and <cluster>-workerN, which must stay valid host names.
func kindClusterName(name, suffix string) string {
	const maxName = 32
	if len(name) > maxName {
		name = name[:maxName]
	}
	return "fluxfed-" + name + "-" + suffix
}

// kindConfig is kind's cluster configuration: one control plane and workers nodes to run pods.
func kindConfig(workers int) []byte {
	var b bytes.Buffer
	b.WriteString("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n")
	for range workers {
		b.WriteString("- role: worker\n")
	}
	return b.Bytes()
}

// kindCreateArgs are the arguments of `kind create cluster`. kind does not wait: the shared
// waiting (API server, ServiceAccount, nodes Ready) does, with the Environment's timeout.
func kindCreateArgs(name, config, kubeconfig, image string) []string {
	args := []string{"create", "cluster", "--name=" + name, "--config=" + config, "--kubeconfig=" + kubeconfig, "--wait=0s"}
	if image != "" {
		args = append(args, "--image="+image)
	}
	return args
}

func (k *kindProvider) up(ctx context.Context, env *Environment, c *Cluster) error {
	name := kindClusterName(c.Name, k.suffix)
	// Recorded before creating, so that a half-created cluster is deleted too.
	if err := env.update(func() { c.KindName = name }); err != nil {
		return err
	}
	config := filepath.Join(c.Dir, "kind.yaml")
	if err := os.WriteFile(config, kindConfig(k.nodes), 0o644); err != nil {
		return err
	}
	kindKubeconfig := filepath.Join(c.Dir, "kind-kubeconfig")
	if err := runKind(ctx, k.kind, filepath.Join(c.Dir, "logs", "kind.log"), kindCreateArgs(name, config, kindKubeconfig, k.image)...); err != nil {
		return err
	}
	kc, err := clientcmd.LoadFromFile(kindKubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig kind wrote: %w", err)
	}
	own, err := normalize(c.Name, kc)
	if err != nil {
		return err
	}
	if err := writeKubeconfig(c.Kubeconfig, own); err != nil {
		return err
	}
	if k.beforeControllers == nil {
		return nil
	}
	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return err
	}
	return k.beforeControllers(ctx, c, cfg)
}

// nodeCount counts the control plane, which kind taints against ordinary pods, besides the workers.
func (k *kindProvider) nodeCount(perCluster int) int { return perCluster + 1 }

func (k *kindProvider) down(c *Cluster) error {
	// Programs started with Environment.Run run on this machine, not in the kind cluster.
	var errs []error
	for _, p := range c.Processes {
		errs = append(errs, p.stop(stopGrace))
	}
	if err := errors.Join(errs...); err != nil || c.KindName == "" {
		return err
	}
	kind := k.kind
	if kind == "" {
		var err error
		if kind, err = exec.LookPath("kind"); err != nil {
			return fmt.Errorf("deleting kind cluster %s needs the kind CLI on PATH: %w", c.KindName, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), kindDeleteTimeout)
	defer cancel()
	return runKind(ctx, kind, filepath.Join(c.Dir, "logs", "kind.log"), "delete", "cluster", "--name="+c.KindName)
}

// runKind runs the kind CLI with its output appended to log, quoting the end of it on failure.
func runKind(ctx context.Context, kind, log string, args ...string) error {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, kind, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kind %s %s: %w; last lines of %s:\n%s", args[0], args[1], err, log, tail(log, tailLines))
	}
	return nil
}
