package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fluxsim"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// fluxPollInterval is how often a Flux stand-in looks for broker pods that started or stopped.
const fluxPollInterval = 200 * time.Millisecond

// joinTimeout bounds one run of the stand-in overlay: brokers that have not joined by then are
// offline until the next change.
const joinTimeout = 20 * time.Second

// Flux stands in for the Flux instance of a root while it runs: a stand-in flux command
// (e2e/fluxsim) answers the hub's commands in the lead broker's container, and its ranks are
// online when their brokers join rank 0 in the stand-in overlay (e2e/brokersim). Whenever the
// set of Running broker pods of the federation changes, the overlay is run again over them,
// and the ranks that joined become the instance's online ranks; a running job that loses a rank
// is killed, as Flux kills it. The instance itself (its queue, its drained ranks, its start time)
// lives on across those runs, as a Flux instance does while brokers come and go.
type Flux struct {
	// Dir holds the instance (fluxsim.EnvDir).
	Dir string
	// Bin holds the stand-in flux command.
	Bin string

	f      *Fleet
	root   client.ObjectKey
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	sim     *brokersim.Sim
	pods    string
	changes []OnlineChange
	err     error
}

// OnlineChange is when the instance's online ranks became Ranks.
type OnlineChange struct {
	Time  time.Time
	Ranks []int
}

// StartFlux stands in for the Flux instance of root, which must be applied on the hub: it
// waits until the root's lead broker pod exists and the hub gave the root its hostlist and lead
// broker endpoint, then makes exec into that pod run the stand-in flux on this machine, and keeps
// the online ranks in step with the broker pods until Stop. dir holds the instance and the
// command; when a program before this one stood in there (make demo KEEP=1 hands its stand-ins
// to a process that outlives it), it carries on with that instance, its jobs and drained ranks.
// dir is recorded with the clusters, so that `clusters down` removes it.
func (f *Fleet) StartFlux(ctx context.Context, root *fluxv1alpha2.MiniCluster, dir string) (*Flux, error) {
	x := &Flux{Dir: filepath.Join(dir, "instance"), Bin: filepath.Join(dir, "bin"), f: f, root: client.ObjectKeyFromObject(root), done: make(chan struct{})}
	if err := f.Env.AddFiles(dir); err != nil {
		return nil, err
	}
	_, err := fluxsim.Read(x.Dir)
	resume := err == nil
	if !resume {
		if err := os.MkdirAll(x.Dir, 0o700); err != nil {
			return nil, err
		}
		if err := buildStandInFlux(filepath.Join(x.Bin, "flux")); err != nil {
			return nil, err
		}
	}
	hubClient := f.Clients[f.Hub.Name]
	var lead *corev1.Pod
	for {
		if err := hubClient.Get(ctx, x.root, root); err != nil {
			return nil, err
		}
		pod, err := leadPod(ctx, hubClient, root)
		if err != nil {
			return nil, err
		}
		if pod != nil && root.Status.Hostlist != "" && root.Status.LeadBroker != nil && root.Status.LeadBroker.Address != "" {
			lead = pod
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("root %s: no lead broker pod with a hostlist and an endpoint: %w", x.root, ctx.Err())
		case <-time.After(fluxPollInterval):
		}
	}
	if !resume {
		if err := createInstance(root, x.Dir); err != nil {
			return nil, err
		}
	}
	env := map[string]string{"PATH": x.Bin + string(os.PathListSeparator) + os.Getenv("PATH"), fluxsim.EnvDir: x.Dir}
	if err := f.Hub.ExecLocally(ctx, lead.Namespace, lead.Name, x.Dir, env); err != nil {
		return nil, err
	}
	loop, cancel := context.WithCancel(context.WithoutCancel(ctx))
	x.cancel = cancel
	go x.keep(loop)
	return x, nil
}

// createInstance creates the stand-in instance of root in dir: its hosts, quorum and owner.
func createInstance(root *fluxv1alpha2.MiniCluster, dir string) error {
	hosts, err := hostlist.Expand(root.Status.Hostlist)
	if err != nil {
		return err
	}
	layout, err := bursting.NewLayout(root)
	if err != nil {
		return err
	}
	in, err := fluxsim.New(hosts, max(layout.Quorum, 1), 2, fluxsim.Now())
	if err != nil {
		return err
	}
	if u, err := user.Current(); err == nil {
		in.Owner = u.Username
		in.UserID, _ = strconv.Atoi(u.Uid)
	}
	return fluxsim.Create(dir, in)
}

// buildStandInFlux builds e2e/cmd/flux at path.
func buildStandInFlux(path string) error {
	cmd := exec.Command("go", "build", "-o", path, "./e2e/cmd/flux")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the stand-in flux: %w\n%s", err, out)
	}
	return nil
}

// leadPod returns the pod of root's rank 0 (completion index 0), or nil before it exists.
func leadPod(ctx context.Context, c client.Client, root *fluxv1alpha2.MiniCluster) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(root.Namespace), client.MatchingLabels{
		batchv1.JobNameLabel: names.JobName(root), batchv1.JobCompletionIndexAnnotation: "0",
	}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

// keep follows the broker pods until ctx ends.
func (x *Flux) keep(ctx context.Context) {
	defer close(x.done)
	for {
		if err := x.step(ctx); err != nil && ctx.Err() == nil {
			x.mu.Lock()
			x.err = err
			x.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fluxPollInterval):
		}
	}
}

// step runs the overlay again when the Running broker pods changed, and records who joined.
func (x *Flux) step(ctx context.Context) error {
	root := &fluxv1alpha2.MiniCluster{}
	if err := x.f.Clients[x.f.Hub.Name].Get(ctx, x.root, root); err != nil {
		return err
	}
	sides, err := x.f.Federation(ctx, root)
	if err != nil {
		return err
	}
	var running []string
	for _, s := range sides {
		for _, p := range s.Pods {
			running = append(running, s.Cluster+"/"+p.Spec.Hostname+"/"+string(p.UID))
		}
	}
	slices.Sort(running)
	key := strings.Join(running, ",")
	x.mu.Lock()
	if key == x.pods {
		x.mu.Unlock()
		return nil
	}
	old := x.sim
	x.sim = nil
	x.mu.Unlock()
	if old != nil {
		old.Close() // frees rank 0's listener and the lead broker's NodePort for the next run
	}
	network, err := Network(root, sides)
	if err != nil {
		return err
	}
	joinCtx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	sim, err := brokersim.Start(joinCtx, Brokers(sides, nil), network)
	if err != nil {
		return err
	}
	online := sim.Result().Online
	if err := fluxsim.SetOnline(x.Dir, online); err != nil {
		sim.Close()
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.sim, x.pods = sim, key
	x.changes = append(x.changes, OnlineChange{Time: time.Now(), Ranks: slices.Clone(online)})
	return nil
}

// Changes returns every change of the online ranks so far, oldest first.
func (x *Flux) Changes() []OnlineChange {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.changes)
}

// Err returns the last error of following the pods, if any.
func (x *Flux) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Instance returns the instance as of now.
func (x *Flux) Instance() (*fluxsim.Instance, error) { return fluxsim.Read(x.Dir) }

// Exec runs a flux command in the root's lead broker container, through the hub's API server
// as kubectl exec does: kwok runs it with the stand-in. It returns the command's output.
func (x *Flux) Exec(ctx context.Context, args ...string) (string, error) {
	return x.f.ExecFlux(ctx, x.root, args...)
}

// ExecFlux runs flux with args in the lead broker container of root (on the hub) through the
// exec API, as kubectl exec does, and returns its standard output.
func (f *Fleet) ExecFlux(ctx context.Context, key client.ObjectKey, args ...string) (string, error) {
	root := &fluxv1alpha2.MiniCluster{}
	hubClient := f.Clients[f.Hub.Name]
	if err := hubClient.Get(ctx, key, root); err != nil {
		return "", err
	}
	pod, err := leadPod(ctx, hubClient, root)
	if err != nil || pod == nil {
		return "", errors.Join(fmt.Errorf("root %s has no lead broker pod", key), err)
	}
	run, err := hub.NewExec(f.Hub.Config)
	if err != nil {
		return "", err
	}
	out, err := run(ctx, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, flux.Command(root.Spec.Flux.Container.MountPath, append([]string{"flux"}, args...)...))
	return string(out), err
}

// Stop ends the stand-in overlay and the following of the pods.
func (x *Flux) Stop() {
	x.cancel()
	<-x.done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sim != nil {
		x.sim.Close()
		x.sim = nil
	}
}
