package workload

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestApply server-side applies what every fixture renders to a real API server, so that the
// API server's own validation (names, labels, volumes, pod spec, Job rules) accepts it; then it
// scales a MiniCluster up and down by applying the Job again, which must be accepted while the
// same change to the pod template is not.
func TestApply(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	owner := client.FieldOwner(fluxv1alpha2.FieldOwnerMember)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hpc"}}))

	for _, rc := range v1alpha2test.RenderCases() {
		t.Run(rc.Name, func(t *testing.T) {
			ns := "fixture-" + rc.Name
			require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			rc.MiniCluster.Namespace = ns
			job, err := Job(rc.MiniCluster)
			require.NoError(t, err)
			require.NoError(t, c.Apply(ctx, job, owner, client.ForceOwnership))
			require.NoError(t, c.Apply(ctx, HeadlessService(rc.MiniCluster), owner, client.ForceOwnership))
			services, err := Services(rc.MiniCluster)
			require.NoError(t, err)
			if services != nil {
				require.NoError(t, c.Apply(ctx, services, owner, client.ForceOwnership))
			}
			// Applying the same again changes nothing and is accepted.
			require.NoError(t, c.Apply(ctx, job, owner, client.ForceOwnership))
		})
	}

	t.Run("scaling changes completions and parallelism of the running Job", func(t *testing.T) {
		mc := v1alpha2test.RenderCaseNamed(t, "max-size") // size 2, maxSize 6
		for _, size := range []int32{2, 6, 3, 1, 4} {
			mc.Spec.Size = size
			job, err := Job(mc)
			require.NoError(t, err)
			require.NoError(t, c.Apply(ctx, job, owner, client.ForceOwnership), "size %d", size)
			got := &batchv1.Job{}
			require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}, got))
			require.Equal(t, size, *got.Spec.Completions)
			require.Equal(t, size, *got.Spec.Parallelism)
		}
	})

	t.Run("a changed pod template is rejected, so scaling must not touch it", func(t *testing.T) {
		mc := v1alpha2test.RenderCaseNamed(t, "max-size")
		mc.Spec.Size = 5
		mc.Spec.Containers[0].Command = "something else"
		mc.Spec.Containers[0].Image = "rockylinux:8"
		job, err := Job(mc)
		require.NoError(t, err)
		err = c.Apply(ctx, job, owner, client.ForceOwnership)
		require.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
		require.ErrorContains(t, err, "field is immutable")
	})
}
