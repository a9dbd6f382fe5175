// Package k8sbin finds the Kubernetes binaries (kube-apiserver, etcd, kube-controller-manager,
// kube-scheduler, kubectl, kwok, kubelet) and CoreDNS that build.sh beside it builds from Go
// modules, so that tests can run real control planes and real nodes as local processes.
package k8sbin

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fluxfed/fluxfed/e2e/envfile"
)

//go:embed versions.env
var versionsEnv string

// EnvAssets names the variable that points at a directory holding the binaries. It is the one
// controller-runtime's envtest reads, so a directory set up for envtest works unchanged.
const EnvAssets = "KUBEBUILDER_ASSETS"

// EnvCache names the variable that overrides the root of the binary cache.
const EnvCache = "FLUXFED_K8S_CACHE"

// Versions holds the pinned versions from versions.env.
type Versions struct {
	// Kube is the k8s.io/kubernetes version, e.g. v1.36.3.
	Kube string
	// Kwok is the sigs.k8s.io/kwok version.
	Kwok string
	// PrometheusOperator is the github.com/prometheus-operator/prometheus-operator version whose
	// ServiceMonitor CRD build.sh fetches.
	PrometheusOperator string
	// CoreDNS is the github.com/coredns/coredns version, e.g. v1.15.0.
	CoreDNS string
	// CoreDNSPlugins are the CoreDNS plugins build.sh builds in, the only directives a Corefile
	// may use, in the order CoreDNS runs them. There is no forward plugin: the clusters' DNS
	// never asks a server outside.
	CoreDNSPlugins []string
}

// Binaries returns the file names of every binary build.sh builds, in the order it builds them.
func Binaries() []string {
	return []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kubelet", "coredns"}
}

// Pinned returns the versions that build.sh builds.
func Pinned() Versions {
	v, err := parseVersions(versionsEnv)
	if err != nil {
		// versions.env is embedded at build time and covered by a test, so this cannot happen
		// in a binary that passed its tests.
		panic(err)
	}
	return v
}

func parseVersions(env string) (Versions, error) {
	values, err := envfile.Parse(env, "KUBE_VERSION", "KWOK_VERSION", "PROMETHEUS_OPERATOR_VERSION", "COREDNS_VERSION", "COREDNS_PLUGINS")
	if err != nil {
		return Versions{}, err
	}
	v := Versions{
		Kube:               values["KUBE_VERSION"],
		Kwok:               values["KWOK_VERSION"],
		PrometheusOperator: values["PROMETHEUS_OPERATOR_VERSION"],
		CoreDNS:            values["COREDNS_VERSION"],
	}
	if v.Kube == "" || v.Kwok == "" || v.PrometheusOperator == "" || v.CoreDNS == "" || values["COREDNS_PLUGINS"] == "" {
		return Versions{}, errors.New("versions.env: KUBE_VERSION, KWOK_VERSION, PROMETHEUS_OPERATOR_VERSION, COREDNS_VERSION and COREDNS_PLUGINS are all required")
	}
	v.CoreDNSPlugins = strings.Split(values["COREDNS_PLUGINS"], ",")
	if slices.Contains(v.CoreDNSPlugins, "forward") {
		return Versions{}, errors.New("versions.env: COREDNS_PLUGINS names forward: the clusters' DNS must never ask a server outside the machine; remove it")
	}
	return v, nil
}

// CacheDir returns where build.sh puts the binaries of the pinned Kubernetes version:
// $FLUXFED_K8S_CACHE/<version>, by default under the user's cache directory
// (~/.cache/fluxfed/k8s/<version>).
func CacheDir() (string, error) {
	root := os.Getenv(EnvCache)
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("finding the user cache directory: %w", err)
		}
		root = filepath.Join(base, "fluxfed", "k8s")
	}
	return filepath.Join(root, Pinned().Kube), nil
}

// Dir returns the directory that holds every binary in names: $KUBEBUILDER_ASSETS when set,
// else the cache. The error says how to build the binaries when they are missing.
func Dir(names ...string) (string, error) {
	dir, from := os.Getenv(EnvAssets), EnvAssets
	if dir == "" {
		var err error
		if dir, err = CacheDir(); err != nil {
			return "", err
		}
		from = "the binary cache"
	}
	var missing []string
	for _, name := range names {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s (%s) lacks %s: run `make k8s-binaries` to build them (minutes the first time), or point %s at a directory that has them",
			dir, from, strings.Join(missing, ", "), EnvAssets)
	}
	return dir, nil
}

// ServiceMonitorCRDFile is where build.sh puts the Prometheus Operator's ServiceMonitor CRD, relative
// to the binaries' directory.
const ServiceMonitorCRDFile = "crds/monitoring.coreos.com_servicemonitors.yaml"

// ServiceMonitorCRD returns the path of the Prometheus Operator's ServiceMonitor CRD of the pinned
// version, beside the binaries (Dir). The error says how to fetch it when it is missing.
func ServiceMonitorCRD() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, ServiceMonitorCRDFile)
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		return "", fmt.Errorf("%s is missing: run `make k8s-binaries`, which fetches it with the Prometheus Operator's module %s", path, Pinned().PrometheusOperator)
	}
	return path, nil
}
