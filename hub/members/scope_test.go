package members

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

func TestWantedScope(t *testing.T) {
	member := func(allow fedv1alpha1.NamespaceAllow, listed ...fedv1alpha1.MemberNamespaceName) *fedv1alpha1.MemberCluster {
		return &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Spec: fedv1alpha1.MemberClusterSpec{Namespaces: fedv1alpha1.MemberNamespaces{Allow: allow, Names: listed}}}
	}
	root := func(ns string, bursts ...fluxv1alpha2.Burst) fluxv1alpha2.MiniCluster {
		return *v1alpha2test.MiniCluster("r-" + ns).Namespace(ns).Size(1).MaxSize(8).Bursts(bursts...).Obj()
	}
	pushed := func(r fluxv1alpha2.MiniCluster, cluster, ns string) fluxv1alpha2.MiniCluster {
		r.Status.Pushed = append(r.Status.Pushed, fluxv1alpha2.PushedObject{Cluster: cluster, Kind: "MiniCluster", Namespace: ns, Name: "b", UID: "u"})
		return r
	}
	child := root("team-a", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1})
	child.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: "127.0.0.1"}
	orphaned := member(fedv1alpha1.NamespaceAllowMirror)
	orphaned.Status.Orphans = []fedv1alpha1.OrphanObject{{Kind: "Secret", Namespace: "gone", Name: "b-curve", UID: "u"}}

	for _, tt := range []struct {
		name   string
		member *fedv1alpha1.MemberCluster
		roots  []fluxv1alpha2.MiniCluster
		want   Scope
	}{
		{"any: every namespace", member(fedv1alpha1.NamespaceAllowAny), nil, Scope{All: true}},
		{"no roots: nothing", member(fedv1alpha1.NamespaceAllowMirror), nil, Scope{}},
		{"mirror: the roots' namespaces, sorted, once",
			member(fedv1alpha1.NamespaceAllowMirror),
			[]fluxv1alpha2.MiniCluster{
				root("team-b", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1}),
				root("team-a", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1}, fluxv1alpha2.Burst{Name: "c", Cluster: "m", Size: 1}),
				root("team-c", fluxv1alpha2.Burst{Name: "b", Cluster: "other", Size: 1}),
			},
			NewScope("team-a", "team-b")},
		{"the default is mirror", member(""), []fluxv1alpha2.MiniCluster{root("team-a", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1})},
			NewScope("team-a")},
		{"mirror: a namespace the policy refuses is not watched",
			member(fedv1alpha1.NamespaceAllowMirror),
			[]fluxv1alpha2.MiniCluster{root("team-a", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1, Namespace: "payroll"})},
			Scope{}},
		{"listed: only listed namespaces",
			member(fedv1alpha1.NamespaceAllowListed, "research"),
			[]fluxv1alpha2.MiniCluster{
				root("team-a", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1, Namespace: "research"}),
				root("team-b", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1}),
			},
			NewScope("research")},
		{"reserved namespaces never",
			member(fedv1alpha1.NamespaceAllowMirror),
			[]fluxv1alpha2.MiniCluster{
				root("kube-system", fluxv1alpha2.Burst{Name: "b", Cluster: "m", Size: 1}),
				pushed(root("x"), "m", "fluxfed-system"),
				pushed(root("y"), "m", "Not A Namespace"),
			},
			Scope{}},
		{"where the hub keeps objects: pushed and orphans",
			orphaned,
			[]fluxv1alpha2.MiniCluster{pushed(root("moved"), "m", "moved"), pushed(root("elsewhere"), "other", "elsewhere")},
			NewScope("gone", "moved")},
		{"a child on the hub bursts nothing", member(fedv1alpha1.NamespaceAllowMirror), []fluxv1alpha2.MiniCluster{child}, Scope{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := WantedScope(tt.member, tt.roots)
			require.True(t, got.Equal(tt.want), "got %+v, want %+v", got, tt.want)
		})
	}
}

func TestScopeCovers(t *testing.T) {
	s := NewScope("b", "a", "b")
	require.Equal(t, []string{"a", "b"}, s.Namespaces)
	require.True(t, s.Covers("a"))
	require.True(t, s.Covers("b"))
	require.False(t, s.Covers("c"))
	require.False(t, s.Covers(""))
	require.False(t, Scope{}.Covers("a"))
	require.True(t, Scope{All: true}.Covers("anything"))
	require.False(t, s.Equal(NewScope("a")))
	require.False(t, s.Equal(Scope{All: true, Namespaces: s.Namespaces}))
}

func TestTheInertCacheHoldsNothingAndIsSynced(t *testing.T) {
	ctx := context.Background()
	c := inertCache{}
	informer, err := c.GetInformer(ctx, &fluxv1alpha2.MiniCluster{})
	require.NoError(t, err)
	reg, err := informer.AddEventHandler(nil)
	require.NoError(t, err)
	require.True(t, reg.HasSynced())
	<-reg.HasSyncedChecker().Done()
	require.True(t, c.WaitForCacheSync(ctx))
	var list fluxv1alpha2.MiniClusterList
	require.NoError(t, c.List(ctx, &list))
	require.Empty(t, list.Items)
	require.Error(t, c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "b"}, &fluxv1alpha2.MiniCluster{}),
		"a read is an error, not NotFound: nothing may conclude from it that an object is absent")
}
