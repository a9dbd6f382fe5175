package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// FluxConfigMap returns the ConfigMap with the broker config and the hostlist every broker of the
// MiniCluster reads at start.
func FluxConfigMap(mc *fluxv1alpha2.MiniCluster, brokerTOML []byte, hostlist string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(names.ConfigMapName(mc), mc.Namespace).
		WithLabels(names.SelectorLabels(mc)).
		WithData(map[string]string{
			names.KeyBrokerTOML: string(brokerTOML),
			names.KeyHostlist:   hostlist,
		})
}

// EntrypointConfigMap returns the ConfigMap with the entrypoint scripts, keyed by file name.
func EntrypointConfigMap(mc *fluxv1alpha2.MiniCluster, scripts map[string]string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(names.EntrypointConfigMapName(mc), mc.Namespace).
		WithLabels(names.SelectorLabels(mc)).
		WithData(scripts)
}

// CurveSecret returns the Secret holding the CURVE certificate file. It is created once and never
// updated: the keypair must stay the same for the life of the Flux instance, so it is not
// applied like the other objects.
func CurveSecret(mc *fluxv1alpha2.MiniCluster, certFile []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.CurveSecretName(mc),
			Namespace: mc.Namespace,
			Labels:    names.SelectorLabels(mc),
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{names.KeyCurveCert: certFile},
	}
}
