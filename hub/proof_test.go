package hub

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func testProver(hub string, key byte) *prover {
	return &prover{hub: hub, key: []byte(strings.Repeat(string(rune('a'+key)), ownershipKeyBytes))}
}

// pushedChild is a child as the hub pushes it for root research/lammps (uid root-1).
func pushedChild(namespace, name string) *fluxv1alpha2.MiniCluster {
	mc := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	fluxv1alpha2.Origin{Hub: "hub-1", Namespace: "research", Name: "lammps", UID: "root-1"}.Mark(mc)
	return mc
}

func TestAProofHoldsOnlyForTheObjectItWasMadeFor(t *testing.T) {
	p := testProver("hub-1", 0)
	signed := pushedChild("research", "burst-a")
	require.NoError(t, p.mark("member-a", "MiniCluster", signed))
	proof := signed.Annotations[fluxv1alpha2.AnnotationProof]
	require.True(t, strings.HasPrefix(proof, proofVersion))
	require.Len(t, proof, len(proofVersion)+43, "a SHA-256 HMAC in unpadded base64url")

	// withProof is a child of namespace/name carrying the proof made above.
	withProof := func(namespace, name string, change func(*fluxv1alpha2.MiniCluster)) *fluxv1alpha2.MiniCluster {
		mc := pushedChild(namespace, name)
		mc.Annotations[fluxv1alpha2.AnnotationProof] = proof
		if change != nil {
			change(mc)
		}
		return mc
	}
	tests := []struct {
		name   string
		p      *prover
		member string
		kind   string
		obj    metav1.Object
		ok     bool
	}{
		{"the object it was made for", p, "member-a", "MiniCluster", withProof("research", "burst-a", nil), true},
		{"the same key, read again", testProver("hub-1", 0), "member-a", "MiniCluster", withProof("research", "burst-a", nil), true},
		{"copied to another name", p, "member-a", "MiniCluster", withProof("research", "burst-b", nil), false},
		{"copied to another namespace", p, "member-a", "MiniCluster", withProof("prod", "burst-a", nil), false},
		{"copied to another member", p, "member-b", "MiniCluster", withProof("research", "burst-a", nil), false},
		{"copied to a Secret of the same name", p, "member-a", "Secret", withProof("research", "burst-a", nil), false},
		{"the root's UID changed", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			mc.Annotations[fluxv1alpha2.AnnotationOriginUID] = "root-2"
		}), false},
		{"relabelled to another root", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			mc.Labels[fluxv1alpha2.LabelOriginName] = "gromacs"
		}), false},
		{"relabelled to another hub", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			mc.Labels[fluxv1alpha2.LabelOriginHub] = "hub-2"
		}), false},
		{"checked by another hub", testProver("hub-2", 0), "member-a", "MiniCluster", withProof("research", "burst-a", nil), false},
		{"checked with another key", testProver("hub-1", 1), "member-a", "MiniCluster", withProof("research", "burst-a", nil), false},
		{"labels without a proof", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			delete(mc.Annotations, fluxv1alpha2.AnnotationProof)
		}), false},
		{"an empty proof", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			mc.Annotations[fluxv1alpha2.AnnotationProof] = ""
		}), false},
		{"a proof without its version", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			mc.Annotations[fluxv1alpha2.AnnotationProof] = strings.TrimPrefix(proof, proofVersion)
		}), false},
		{"the proof without the origin UID", p, "member-a", "MiniCluster", withProof("research", "burst-a", func(mc *fluxv1alpha2.MiniCluster) {
			delete(mc.Annotations, fluxv1alpha2.AnnotationOriginUID)
		}), false},
		{"no marks at all", p, "member-a", "MiniCluster", &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin, ok := tt.p.verify(tt.member, tt.kind, tt.obj)
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, fluxv1alpha2.Origin{Hub: "hub-1", Namespace: "research", Name: "lammps", UID: "root-1"}, origin)
			}
		})
	}
}

func TestOwnedByAcceptsOnlyTheRootsOwnObjects(t *testing.T) {
	p := testProver("hub-1", 0)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a-curve"}}
	fluxv1alpha2.Origin{Hub: "hub-1", Namespace: "research", Name: "lammps", UID: "root-1"}.Mark(secret)
	require.NoError(t, p.mark("member-a", "Secret", secret))
	require.True(t, p.ownedBy("member-a", "Secret", "root-1")(secret))
	require.False(t, p.ownedBy("member-a", "Secret", "root-2")(secret), "an earlier root of the same name is another root")
	require.False(t, p.ownedBy("member-a", "MiniCluster", "root-1")(secret))
	require.Equal(t, "Secret", kindOf(secret))
	require.Equal(t, "MiniCluster", kindOf(pushedChild("research", "burst-a")))

	require.Error(t, p.mark("member-a", "Secret", &corev1.Secret{}), "nothing without this hub's origin is proven")
	other := pushedChild("research", "burst-a")
	other.Labels[fluxv1alpha2.LabelOriginHub] = "hub-2"
	require.Error(t, p.mark("member-a", "MiniCluster", other))
}

// FuzzProof checks that an object is accepted only with the proof the hub makes for exactly its
// place and origin, and that the hub accepts every proof it makes, whatever the marks hold.
func FuzzProof(f *testing.F) {
	f.Add("member-a", "research", "burst-a", "research", "lammps", "root-1", "v1.AAAA")
	f.Add("", "", "", "", "", "", "")
	f.Add("member-a", "a\x00b", "c", "d", "e", "f", proofVersion)
	p := testProver("hub-1", 0)
	f.Fuzz(func(t *testing.T, member, namespace, name, rootNamespace, rootName, rootUID, proof string) {
		origin := fluxv1alpha2.Origin{Hub: "hub-1", Namespace: rootNamespace, Name: rootName, UID: types.UID(rootUID)}
		complete := rootNamespace != "" && rootName != "" && rootUID != ""
		mc := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		origin.Mark(mc)
		mc.Annotations[fluxv1alpha2.AnnotationProof] = proof
		_, ok := p.verify(member, "MiniCluster", mc)
		require.Equal(t, complete && proof == p.sign(member, "MiniCluster", namespace, name, origin), ok)

		require.Equal(t, complete, p.mark(member, "MiniCluster", mc) == nil)
		got, ok := p.verify(member, "MiniCluster", mc)
		require.Equal(t, complete, ok, "the hub accepts what it marked")
		if ok {
			require.Equal(t, origin, got)
		}
	})
}
