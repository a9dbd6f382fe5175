// Package names fixes the names, keys, paths and labels of a MiniCluster's objects that the
// renderers, the reconciler, the hub and the tests share, so that each can be written and tested
// on its own. It is a leaf: it imports only the API.
package names

import (
	"strings"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Keys of the files in the MiniCluster's ConfigMaps and Secret.
const (
	// KeyBrokerTOML holds the broker config (the [bootstrap] table and the rest) in the flux
	// ConfigMap.
	KeyBrokerTOML = "broker.toml"
	// KeyHostlist holds the hostlist the brokers of this MiniCluster bootstrap with, as one RFC 29
	// string; R is encoded from exactly these hosts.
	KeyHostlist = "hostlist"
	// KeyCurveCert holds the CURVE certificate file in the curve Secret.
	KeyCurveCert = "curve.cert"
)

// Paths inside the pods. The flux view, the broker config and the certificate live under the
// flux-view mount (spec.flux.container.mountPath) once the init container has provisioned it;
// the ConfigMaps and the Secret are mounted read-only at these fixed paths.
const (
	// ConfigMountPath is where the flux ConfigMap (broker.toml, hostlist) is mounted.
	ConfigMountPath = "/fluxfed/config"
	// CurveMountPath is where the curve Secret is mounted, with mode 0400.
	CurveMountPath = "/fluxfed/curve"
	// EntrypointMountPath is where the entrypoint ConfigMap (one script per container and the
	// flux-view provisioner) is mounted.
	EntrypointMountPath = "/fluxfed/entrypoint"
)

// DefaultBrokerPort is the port every broker binds and connects on inside a cluster, as in the
// Flux Operator (FLUX.md).
const DefaultBrokerPort = 8050

// JobName returns the name of the indexed Job; its pods are '<name>-<index>'.
func JobName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name }

// CurveSecretName returns the name of the Secret holding the CURVE certificate.
func CurveSecretName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name + CurveSecretSuffix }

// CurveSecretSuffix ends the name of every CURVE Secret: the MiniCluster's name comes before it.
const CurveSecretSuffix = "-curve"

// ConfigMapName returns the name of the ConfigMap holding broker.toml and the hostlist.
func ConfigMapName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name + "-flux-config" }

// EntrypointConfigMapName returns the name of the ConfigMap holding the entrypoint scripts.
func EntrypointConfigMapName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name + "-entrypoint" }

// ServicesName returns the name of the pod (and its Job) that runs spec.services.
func ServicesName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name + "-services" }

// LeadBrokerServiceName returns the name of the Service a hub creates to expose rank 0.
func LeadBrokerServiceName(mc *fluxv1alpha2.MiniCluster) string { return mc.Name + "-lead-broker" }

// SelectorLabels returns the labels that select exactly this MiniCluster's pods: its brokers and
// its spec.services pod, all of which the headless Service resolves. Every object fluxfed makes
// for the MiniCluster carries them too.
func SelectorLabels(mc *fluxv1alpha2.MiniCluster) map[string]string {
	return map[string]string{fluxv1alpha2.LabelMiniCluster: mc.Name}
}

// MountPath returns M, the directory where every container of a broker pod sees the volume
// that the init container provisions.
func MountPath(mc *fluxv1alpha2.MiniCluster) string {
	if p := mc.Spec.Flux.Container.MountPath; p != "" {
		return strings.TrimRight(p, "/")
	}
	return DefaultMountPath
}

// ContainerName returns the name of spec.containers[i] in the pod: its own, or the
// MiniCluster's name for the container that runs Flux when it has none.
func ContainerName(mc *fluxv1alpha2.MiniCluster, i int) string {
	c := &mc.Spec.Containers[i]
	if c.Name == "" && mc.FluxContainer() == c {
		return mc.Name
	}
	return c.Name
}

// FluxContainerName returns the name in the pod of the container that runs Flux; the
// MiniCluster's name when no container qualifies, which the schema does not admit.
func FluxContainerName(mc *fluxv1alpha2.MiniCluster) string {
	for i := range mc.Spec.Containers {
		if &mc.Spec.Containers[i] == mc.FluxContainer() {
			return ContainerName(mc, i)
		}
	}
	return mc.Name
}

// DefaultMountPath is where the flux view is mounted when spec.flux.container.mountPath is
// empty; the schema fills it in, and the renderers apply it too.
const DefaultMountPath = "/mnt/flux"
