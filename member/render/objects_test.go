package render

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestObjects(t *testing.T) {
	mc := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Name: "flux-sample", Namespace: "hpc"}}
	labels := map[string]string{fluxv1alpha2.LabelMiniCluster: "flux-sample"}

	t.Run("flux config", func(t *testing.T) {
		cm := FluxConfigMap(mc, []byte("[bootstrap]\n"), "flux-sample-[0-1]")
		require.Equal(t, "flux-sample-flux-config", *cm.Name)
		require.Equal(t, "hpc", *cm.Namespace)
		require.Equal(t, labels, cm.Labels)
		require.Equal(t, map[string]string{"broker.toml": "[bootstrap]\n", "hostlist": "flux-sample-[0-1]"}, cm.Data)
	})
	t.Run("entrypoint", func(t *testing.T) {
		cm := EntrypointConfigMap(mc, map[string]string{"a.sh": "#!/bin/sh\n"})
		require.Equal(t, "flux-sample-entrypoint", *cm.Name)
		require.Equal(t, labels, cm.Labels)
		require.Equal(t, map[string]string{"a.sh": "#!/bin/sh\n"}, cm.Data)
	})
	t.Run("curve secret is immutable", func(t *testing.T) {
		s := CurveSecret(mc, []byte("cert"))
		require.Equal(t, "flux-sample-curve", s.Name)
		require.Equal(t, labels, s.Labels)
		require.Equal(t, corev1.SecretTypeOpaque, s.Type)
		require.True(t, *s.Immutable)
		require.Equal(t, []byte("cert"), s.Data["curve.cert"])
	})
}
