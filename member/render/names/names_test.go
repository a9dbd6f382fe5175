package names

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestNames(t *testing.T) {
	mc := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Name: "flux-sample", Namespace: "hpc"}}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "job", got: JobName(mc), want: "flux-sample"},
		{name: "curve secret", got: CurveSecretName(mc), want: "flux-sample-curve"},
		{name: "config map", got: ConfigMapName(mc), want: "flux-sample-flux-config"},
		{name: "entrypoint config map", got: EntrypointConfigMapName(mc), want: "flux-sample-entrypoint"},
		{name: "services", got: ServicesName(mc), want: "flux-sample-services"},
		{name: "lead broker service", got: LeadBrokerServiceName(mc), want: "flux-sample-lead-broker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
		})
	}
	require.Equal(t, map[string]string{fluxv1alpha2.LabelMiniCluster: "flux-sample"}, SelectorLabels(mc))
}
