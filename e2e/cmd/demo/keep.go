package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// keptRoots are the demo's roots, whose stand-ins outlive the demo with KEEP=1.
var keptRoots = []client.ObjectKey{
	{Namespace: namespace, Name: "bursting-root"},
	{Namespace: elasticNamespace, Name: "on-demand"},
}

// keeperComponent names the stand-ins' process among the hub's processes, and its log
// (<dir>/hub/logs/demo-stand-ins.log).
const keeperComponent = "demo-stand-ins"

// keeperReady is the line the stand-ins' process logs once it serves everything.
const keeperReady = "Serving the stand-ins of the kept demo"

// handOver hands what the kept clusters need from the demo's process to a process of its own,
// which outlives the demo: the nodes' kubelet endpoints (exec into pods, so the hub's flux
// commands), and for each root its stand-in Flux instance and overlay (rank 0's broker behind the
// lead broker's NodePort). The demo's own stand-ins have stopped by now. The process is one of
// the hub's processes in the clusters' state, so make clusters-down stops it and removes its
// binary.
func handOver(ctx context.Context, f *fleet.Fleet, dir string, say func(string, ...any)) error {
	f.Env.ReleaseKubelets()
	binary := filepath.Join(dir, keeperComponent)
	if err := f.Env.AddFiles(binary); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./e2e/cmd/demo")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the stand-ins' process: %w\n%s", err, out)
	}
	p, err := f.Env.Run(f.Hub, keeperComponent, binary, "keep", "-dir", dir)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, _ := os.ReadFile(p.Log)
		switch {
		case bytes.Contains(data, []byte(keeperReady)):
			say("The stand-ins (Flux of both roots, rank 0 behind each lead broker's NodePort, exec into pods) run on in process %d; its log: %s", p.PID, p.Log)
			return nil
		case !p.Running() || time.Now().After(deadline):
			return fmt.Errorf("the stand-ins' process did not start serving (within 2m, or it exited); its log:\n%s", data)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// keepStandIns is `demo keep -dir DIR`: it serves the stand-ins of the demo kept in dir until it
// is stopped (make clusters-down sends SIGTERM).
func keepStandIns(ctx context.Context, dir string, out io.Writer) error {
	if dir == "" {
		return errors.New("demo keep: -dir names the kept demo's directory")
	}
	f, err := fleet.Load(dir)
	if err != nil {
		return err
	}
	if err := f.Env.ServeKubelets(); err != nil {
		return err
	}
	defer f.Env.ReleaseKubelets()
	var names []string
	for _, key := range keptRoots {
		root := &fluxv1alpha2.MiniCluster{}
		if err := f.Clients[f.Hub.Name].Get(ctx, key, root); err != nil {
			return fmt.Errorf("root %s: %w", key, err)
		}
		x, err := f.StartFlux(ctx, root, filepath.Join(dir, "flux-"+root.Name))
		if err != nil {
			return fmt.Errorf("the stand-in Flux of %s: %w", key, err)
		}
		defer x.Stop()
		if err := awaitOverlay(ctx, x); err != nil {
			return fmt.Errorf("the stand-in overlay of %s: %w", key, err)
		}
		names = append(names, key.String())
	}
	fmt.Fprintf(out, "%s: %s; exec into the pods of %d clusters\n", keeperReady, strings.Join(names, ", "), len(f.Env.Clusters))
	<-ctx.Done()
	fmt.Fprintln(out, "Stopping the stand-ins")
	return nil
}

// awaitOverlay waits until the stand-in overlay of x ran once over the root's broker pods: from
// then on rank 0 answers behind the lead broker's NodePort and the instance's ranks are online.
func awaitOverlay(ctx context.Context, x *fleet.Flux) error {
	deadline := time.Now().Add(2 * time.Minute)
	for len(x.Changes()) == 0 {
		if time.Now().After(deadline) {
			if err := x.Err(); err != nil {
				return fmt.Errorf("no run of the overlay within 2m: %w", err)
			}
			return errors.New("no run of the overlay within 2m")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
