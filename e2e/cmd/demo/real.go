package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
)

// realDemo is make demo FLUX=real: the same federation and elastic act, with a real flux-core
// broker behind every broker pod (e2e/realflux) and the hub asking Flux at its default
// intervals. Nothing stands in: the burst brokers join rank 0 through the lead broker's
// NodePort, the hub reads the real instance, and one job runs on every rank of the three
// clusters.
//
// With realPods (make demo PODS=real, realPodsDemo) the brokers run in the pods themselves, on
// the clusters' real nodes, and the hub reaches rank 0 through its kubelet.
func realDemo(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any), realPods bool) error {
	hubClient := f.Clients["hub"]
	if err := register(ctx, f, out, say); err != nil {
		return err
	}
	joinTimeout := realJoinTimeout
	if realPods {
		joinTimeout = realPodsTimeout
	}
	applied := time.Now()
	root, err := applyRoot(ctx, f, say, realPods)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(root)

	// Follow the root until its Flux instance sees every rank of the federation online.
	last := ""
	deadline := applied.Add(joinTimeout)
	for {
		if err := hubClient.Get(ctx, key, root); err != nil {
			return err
		}
		now := describeHub(root)
		if now != last {
			say("%s", now)
			last = now
		}
		if fs := root.Status.Flux; fs != nil && fs.State == "run" && fs.Size > 0 && fs.Online == fs.Size && shows(root, fluxv1alpha2.BurstJoined) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the root's Flux instance did not see every rank online within %v (last: %s); logs are in %s", joinTimeout, last, f.Env.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	say("Every rank of the federation is online in the root's Flux instance, as the hub reads it, %v after the apply", time.Since(applied).Round(100*time.Millisecond))
	if err := fluxfed(ctx, f, out, say, statusArgs(f)...); err != nil {
		return err
	}
	if realPods {
		fmt.Fprintf(out, "  (LeadBrokerReachable is False on this machine only: the hub greets the advertised %s, which exists in the members' sandboxes, where this program carries it to the hub's node, and the hub may dial only loopback here; the bursts reached rank 0 through it, as Joined says.)\n", fleet.HubAddress)
	}

	size := strconv.Itoa(int(root.Status.Flux.Size))
	fmt.Fprintln(out, "\n== One job on every rank of the three clusters")
	say("flux run -N%s --label-io hostname   (in rank 0's container)", size)
	hosts, err := f.ExecFlux(ctx, key, "run", "-N"+size, "--label-io", "hostname")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(hosts), "\n")
	slices.SortFunc(lines, func(a, b string) int { return rankOf(a) - rankOf(b) })
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}

	where := "behind every broker pod"
	if realPods {
		where = "in every broker pod"
	}
	return elastic(ctx, f, out, say, realPods, func(root *fluxv1alpha2.MiniCluster) (instance, error) {
		say("Real Flux runs %s; the hub asks it every %v at first, backing off to %v while nothing changes", where, hub.DefaultFluxInterval, hub.DefaultFluxIntervalMax)
		return realInstance{f: f, root: client.ObjectKeyFromObject(root)}, nil
	})
}

// realJoinTimeout bounds the wait for every rank: about 15 s on an idle machine.
const realJoinTimeout = 3 * time.Minute

// shows reports whether every burst of root is in phase.
func shows(root *fluxv1alpha2.MiniCluster, phase fluxv1alpha2.BurstPhase) bool {
	for _, b := range root.Status.Bursts {
		if b.Phase != phase {
			return false
		}
	}
	return len(root.Status.Bursts) > 0
}

// rankOf is the rank of a line of flux run --label-io: "3: burst-a-1".
func rankOf(line string) int {
	r, _, _ := strings.Cut(line, ":")
	n, err := strconv.Atoi(strings.TrimSpace(r))
	if err != nil {
		return -1
	}
	return n
}

// realInstance is a root's real Flux instance, reached in its lead broker's container.
type realInstance struct {
	f    *fleet.Fleet
	root client.ObjectKey
}

func (r realInstance) Exec(ctx context.Context, args ...string) (string, error) {
	return r.f.ExecFlux(ctx, r.root, args...)
}

// Jobs lists the jobs with flux jobs -a --json; a job with an exception counts as killed.
func (r realInstance) Jobs(ctx context.Context) ([]job, int, error) {
	out, err := r.Exec(ctx, "jobs", "-a", "--json")
	if err != nil {
		return nil, 0, err
	}
	var list struct {
		Jobs []listedJob `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, 0, fmt.Errorf("flux jobs: %w", err)
	}
	slices.SortFunc(list.Jobs, func(a, b listedJob) int { return cmp.Compare(a.TSubmit, b.TSubmit) })
	var jobs []job
	killed := 0
	for _, j := range list.Jobs {
		ranks, _ := flux.ParseIDSet(j.Ranks) // "" before it runs
		jobs = append(jobs, job{State: j.State, Ranks: len(ranks)})
		if j.Exception.Occurred {
			killed++
		}
	}
	return jobs, killed, nil
}

func (realInstance) Stop() {}

// listedJob is what flux jobs --json says of a job, as far as the demo reads it.
type listedJob struct {
	State     string  `json:"state"`
	Ranks     string  `json:"ranks"`
	TSubmit   float64 `json:"t_submit"`
	Exception struct {
		Occurred bool `json:"occurred"`
	} `json:"exception"`
}
