package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestABurstOnAMemberWithoutFluxfedSaysSo registers, under a root's burst, a member whose API
// server does not serve the MiniCluster API (fluxfed is not installed there): the burst is not
// left Pending, it is Failed with the member's reason and how to install fluxfed, and an event
// says so; `kubectl get minicluster` shows the root's phase and its bursts, the one at size 0
// apart.
func TestABurstOnAMemberWithoutFluxfedSaysSo(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a")
	ctx := context.Background()

	ns := f.namespace(t)
	root := newRoot(ns, "stranded",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-idle", Cluster: "member-a", Size: 0, MaxSize: 2},
		fluxv1alpha2.Burst{Name: "burst-bare", Cluster: "bare", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-bare", fluxv1alpha2.BurstUnreachable)

	// A member without fluxfed: its CRD is deleted before it is registered, and no MiniCluster
	// reconciler runs there.
	bare := &memberCluster{name: "bare", env: testenv.Start(t)}
	withoutMiniClusterCRD(t, bare.env)
	bare.proxy = testenv.StartProxy(t, bare.env.Config.Host)
	f.mu.Lock()
	f.members[bare.name] = bare
	f.mu.Unlock()
	f.register(t, bare.name, bare.env.Config)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ready := meta.FindStatusCondition(f.memberCluster(c, bare.name).Status.Conditions, fedv1alpha1.ConditionReady)
		require.NotNil(c, ready)
		require.Equal(c, fedv1alpha1.ReasonFluxfedMissing, ready.Reason)
	}, wait, tick)
	memberReady := meta.FindStatusCondition(f.memberCluster(t, bare.name).Status.Conditions, fedv1alpha1.ConditionReady)
	require.Contains(t, memberReady.Message, members.InstallHint)

	got := f.waitBurst(t, root, "burst-bare", fluxv1alpha2.BurstFailed)
	require.Equal(t, "MemberNotReady: member bare is not ready (FluxfedMissing): "+memberReady.Message, got.Message)
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	f.waitBurst(t, root, "burst-idle", fluxv1alpha2.BurstReserved)
	bursting := meta.FindStatusCondition(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionBursting)
	require.NotNil(t, bursting)
	require.Equal(t, metav1.ConditionFalse, bursting.Status)
	require.Equal(t, fluxv1alpha2.ReasonMemberNotReady, bursting.Reason)
	require.Equal(t, "2 of 3 bursts applied; burst-bare on bare: member bare is not ready (FluxfedMissing): "+memberReady.Message, bursting.Message)
	f.requireEvent(t, ns, fluxv1alpha2.ReasonMemberNotReady, "burst-bare on bare: member bare is not ready (FluxfedMissing)")

	// `kubectl get minicluster`, as the API server prints it: envtest runs no pods, so the root
	// is Pending; of its two bursts that run brokers none is ready, and burst-idle, at size 0,
	// is counted apart.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, map[string]any{"Name": "stranded", "Size": int64(2), "Ready": nil, "Phase": "Pending", "Bursts": "0/2 (+1 reserved)"},
			f.tableRow(c, ns, "stranded", "Age"))
	}, wait, tick)
}

// withoutMiniClusterCRD deletes the MiniCluster CRD from env and waits until it is no longer
// served.
func withoutMiniClusterCRD(t testing.TB, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	crds, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, crds.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: members.MiniClusterCRD}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := crds.Get(ctx, client.ObjectKey{Name: members.MiniClusterCRD}, &apiextensionsv1.CustomResourceDefinition{})
		require.True(c, apierrors.IsNotFound(err), "the CRD is still there: %v", err)
		cs, err := kubernetes.NewForConfig(env.Config)
		require.NoError(c, err)
		_, err = cs.Discovery().ServerResourcesForGroupVersion(fluxv1alpha2.GroupVersion.String())
		require.True(c, apierrors.IsNotFound(err), "the MiniCluster API is still served: %v", err)
	}, wait, tick)
}

// tableRow returns the cells of the MiniCluster ns/name as the API server prints it for
// `kubectl get` (the default columns), by column name, leaving out the columns named in skip.
func (f *federation) tableRow(t require.TestingT, ns, name string, skip ...string) map[string]any {
	cs, err := kubernetes.NewForConfig(f.hub.Config)
	require.NoError(t, err)
	data, err := cs.RESTClient().Get().AbsPath("/apis", fluxv1alpha2.GroupName, "v1alpha2", "namespaces", ns, "miniclusters", name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err)
	var table struct {
		ColumnDefinitions []metav1.TableColumnDefinition `json:"columnDefinitions"`
		Rows              []struct {
			Cells []any `json:"cells"`
		} `json:"rows"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	require.NoError(t, d.Decode(&table))
	require.Len(t, table.Rows, 1)
	row := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		if c.Priority != 0 || slices.Contains(skip, c.Name) {
			continue
		}
		cell := table.Rows[0].Cells[i]
		if n, ok := cell.(json.Number); ok {
			v, err := n.Int64()
			require.NoError(t, err)
			cell = v
		}
		row[c.Name] = cell
	}
	return row
}
