package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/fluxsim"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// elasticNamespace holds the elastic act: its bursts are named like bursting-root's, and
// children of two roots cannot share a name in one namespace of a member.
const elasticNamespace = "demo-elastic"

// elasticIdle is the demo's scaleDownAfter: the example's 5m, shortened so that the shrink shows.
const elasticIdle = 10 * time.Second

// instance is the Flux instance of a root as the demo reaches it, through the exec API in its
// lead broker's container: a stand-in (e2e/fluxsim) or real Flux.
type instance interface {
	// Exec runs flux with args in rank 0's container and returns its output.
	Exec(ctx context.Context, args ...string) (string, error)
	// Jobs returns every job of the instance, oldest first, and how many were killed.
	Jobs(ctx context.Context) ([]job, int, error)
	// Stop ends what answers for the instance, if anything.
	Stop()
}

// job is what the demo shows of a job.
type job struct {
	// State is Flux's: SCHED, RUN, CLEANUP, INACTIVE.
	State string
	// Ranks is how many ranks it runs on.
	Ranks int
}

// standIn is the stand-in instance of e2e/fluxsim.
type standIn struct{ *fleet.Flux }

func (s standIn) Jobs(context.Context) ([]job, int, error) {
	in, err := s.Instance()
	if err != nil {
		return nil, 0, err
	}
	var jobs []job
	for _, j := range in.Jobs {
		jobs = append(jobs, job{State: j.State, Ranks: len(j.Ranks)})
	}
	return jobs, in.Killed, nil
}

// elastic shows on-demand bursting: examples/bursting-on-demand.yaml starts with its bursts
// reserved at 0; a job that needs them is submitted in rank 0's container; the hub grows the
// bursts, Flux sees the new ranks online, the job runs and ends, and once the ranks idled the hub
// drains them in Flux and shrinks the bursts. start returns the root's Flux instance, which the
// hub reaches through the exec API as the demo does. With realPods the example runs on the real
// nodes (onRealPods).
func elastic(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any), realPods bool, start func(*fluxv1alpha2.MiniCluster) (instance, error)) error {
	hubClient := f.Clients["hub"]
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "bursting-on-demand.yaml"))
	if err != nil {
		return err
	}
	root := &fluxv1alpha2.MiniCluster{}
	if err := yaml.UnmarshalStrict(data, root); err != nil {
		return err
	}
	if err := hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elasticNamespace}}); err != nil {
		return err
	}
	root.Namespace = elasticNamespace
	root.Spec.Flux.Bursting.Scaling.ScaleDownAfter = &metav1.Duration{Duration: elasticIdle}
	fmt.Fprintf(out, "\n== Elastic bursting: Flux's queue sizes the bursts\n")
	timeout := elasticTimeout
	if realPods {
		onRealPods(root)
		timeout = realPodsTimeout
		say("kubectl apply -n %s -f examples/bursting-on-demand.yaml   (on the hub; scaleDownAfter shortened to %v; %s)", elasticNamespace, elasticIdle, realPodsChanges())
	} else {
		say("kubectl apply -n %s -f examples/bursting-on-demand.yaml   (on the hub; scaleDownAfter shortened to %v)", elasticNamespace, elasticIdle)
	}
	if err := hubClient.Create(ctx, root); err != nil {
		return err
	}
	x, err := start(root)
	if err != nil {
		return err
	}
	defer x.Stop()

	// Two views, each printed when it changes and labelled: what the hub reports (one read of
	// the root's status: Flux's view as the hub last asked it, and the bursts) and the jobs as
	// the instance lists them now. The hub asks Flux every few seconds, so it may still report
	// a job waiting that the instance already runs.
	var (
		lastHub, lastJobs string
		submitted         bool
		jobID             string
		deadline          = time.Now().Add(timeout)
	)
	for {
		if err := hubClient.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			return err
		}
		fs := root.Status.Flux
		jobs, killed, err := x.Jobs(ctx)
		if err != nil {
			if fs != nil && fs.State == "run" {
				return err
			}
			jobs = nil // the instance does not run yet: no job to show
		}
		if now := describeHub(root); now != lastHub && fs != nil && fs.State != "" {
			say("%s", now)
			lastHub = now
		}
		if now := describeJobs(jobs); now != lastJobs && now != "" {
			say("%s", now)
			lastJobs = now
		}
		switch {
		case !submitted && fs != nil && fs.State == "run" && fs.Online == 2:
			say("flux submit -N6 sleep 5   (in rank 0's container: the job needs every reserved rank)")
			if jobID, err = x.Exec(ctx, "submit", "-N6", "sleep", "5"); err != nil {
				return err
			}
			jobID = strings.TrimSpace(jobID)
			submitted = true
		case submitted && len(jobs) > 0 && jobs[0].State == fluxsim.StateInactive && shrunk(root) && fs != nil && fs.Online == 2:
			say("Job %s ran and ended; the bursts idled %v, were drained in Flux and shrank to 0, and Flux sees their ranks gone. Jobs killed: %d", jobID, elasticIdle, killed)
			if err := printScaling(ctx, out, hubClient, root); err != nil {
				return err
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the elastic cycle did not complete within %v (last: %s; %s); logs are in %s", timeout, lastHub, lastJobs, f.Env.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// elasticTimeout bounds the elastic act: about a minute with real Flux and the hub's default
// intervals.
const elasticTimeout = 5 * time.Minute

// describeHub sums up what the hub reports of root, all from one read of its status: Flux's view
// as the hub last asked it, and every burst.
func describeHub(root *fluxv1alpha2.MiniCluster) string {
	var b strings.Builder
	if fs := root.Status.Flux; fs != nil && fs.State != "" {
		fmt.Fprintf(&b, "hub: Flux %s, %d/%d ranks online", fs.State, fs.Online, fs.Size)
		if fs.PendingJobs > 0 {
			fmt.Fprintf(&b, ", %d job waits for %d nodes", fs.PendingJobs, fs.PendingNodes)
		}
	} else {
		b.WriteString("hub: Flux not asked yet")
	}
	for _, s := range root.Status.Bursts {
		fmt.Fprintf(&b, " | %s %s size %d/%d online %d", s.Name, s.Phase, s.Size, s.MaxSize, s.Online)
		if s.Draining+s.Drained > 0 {
			fmt.Fprintf(&b, " draining %d drained %d", s.Draining, s.Drained)
		}
	}
	return b.String()
}

// describeJobs sums up the jobs as the instance lists them, or "" when there are none.
func describeJobs(jobs []job) string {
	if len(jobs) == 0 {
		return ""
	}
	var parts []string
	for _, j := range jobs {
		part := j.State
		if j.Ranks > 0 && j.State != fluxsim.StateSched {
			part += fmt.Sprintf(" on %d ranks", j.Ranks)
		}
		parts = append(parts, part)
	}
	return "flux jobs: " + strings.Join(parts, ", ")
}

func shrunk(root *fluxv1alpha2.MiniCluster) bool {
	for _, s := range root.Status.Bursts {
		if s.Phase != fluxv1alpha2.BurstReserved {
			return false
		}
	}
	return len(root.Status.Bursts) > 0
}

// printScaling lists the hub's scaling events about root, as kubectl get events shows them. The
// hub records events after it writes the status, and the recorder sends them in the background:
// it waits a little for the event of every burst's shrink.
func printScaling(ctx context.Context, out io.Writer, hubClient client.Client, root *fluxv1alpha2.MiniCluster) error {
	var evs []corev1.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		var list corev1.EventList
		if err := hubClient.List(ctx, &list, client.InNamespace(root.Namespace)); err != nil {
			return err
		}
		evs = evs[:0]
		lowered := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == root.Name && strings.HasPrefix(e.Reason, "BurstScaled") {
				evs = append(evs, e)
				if strings.HasPrefix(e.Message, "lowered ") {
					lowered++
				}
			}
		}
		if lowered >= len(root.Status.Bursts) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	slices.SortFunc(evs, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	fmt.Fprintf(out, "\n== What the hub decided (kubectl get events --field-selector involvedObject.name=%s)\n", root.Name)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  REASON\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(w, "  %s\t%s\n", e.Reason, e.Message)
	}
	return w.Flush()
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}
