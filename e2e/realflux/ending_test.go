package realflux

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
)

// TestHowARealMiniClusterEnds runs, with real brokers behind every pod, each way a MiniCluster
// ends (docs/minicluster.md, "How a MiniCluster ends"), and prints the exit table: what each
// container ended with, and the MiniCluster's conditions.
func TestHowARealMiniClusterEnds(t *testing.T) {
	r, cl := oneCluster(t)
	describeOnFailure(t, cl, r, "")
	lane := &lanetest.EndingLane{Client: cl, Wait: busyWait, Tick: 500 * time.Millisecond, EndingsWait: time.Minute,
		Uptime: func(ctx context.Context, _ *fluxv1alpha2.MiniCluster, lead *corev1.Pod) (string, error) {
			return r.Flux(ctx, client.ObjectKeyFromObject(lead), "uptime")
		},
		KillBroker: func(t *testing.T, lead *corev1.Pod) {
			n, err := r.KillBroker(client.ObjectKeyFromObject(lead))
			require.NoError(t, err)
			require.Equal(t, 1, n)
		},
		Watch: func(*testing.T, string) func(*fluxv1alpha2.MiniCluster) []lanetest.ContainerEnding {
			return func(mc *fluxv1alpha2.MiniCluster) []lanetest.ContainerEnding { return runnerEndings(r, mc) }
		},
	}
	cases := lanetest.EndingCases(func(name string, size int32, command string) *v1alpha2test.Builder {
		return v1alpha2test.MiniCluster(name).Size(size).Command(command)
	})
	var table []string
	for i, tc := range cases {
		table = append(table, lane.Run(t, fmt.Sprintf("end-%d", i), tc))
	}
	t.Logf("how a MiniCluster of real brokers ends:\n%s", strings.Join(table, "\n"))
}

// runnerEndings is how the runner saw the broker containers of mc end, in the order they ended.
func runnerEndings(r *Runner, mc *fluxv1alpha2.MiniCluster) []lanetest.ContainerEnding {
	var out []lanetest.ContainerEnding
	for _, e := range r.Endings() {
		if e.Pod.Namespace != mc.Namespace {
			continue
		}
		index := strings.SplitN(strings.TrimPrefix(e.Pod.Name, mc.Name+"-"), "-", 2)[0]
		out = append(out, lanetest.ContainerEnding{Index: index, Ended: lanetest.Ended(e.Code, e.Stopped, e.Message)})
	}
	return out
}
