// Package release builds what a fluxfed release ships besides its image, from the kustomizations
// under deploy/: one manifest per mode (`make release-manifests` writes them to dist/), and the
// generated files of the Helm chart deploy/chart/fluxfed, its CRDs, the rules of its roles and the
// MiniCluster deprecation policy (`make chart`). Both come from `kubectl kustomize` output, so
// that deploy/ stays the one source of the CRDs and the permissions.
package release

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/deploy"
)

// Kustomizer builds the kustomization deploy/<dir> and returns its YAML.
type Kustomizer func(dir string) ([]byte, error)

// Kubectl returns a Kustomizer that runs `<kubectl> kustomize <deployDir>/<dir>`.
func Kubectl(kubectl, deployDir string) Kustomizer {
	return func(dir string) ([]byte, error) {
		path := filepath.Join(deployDir, dir)
		out, err := exec.Command(kubectl, "kustomize", path).Output()
		if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
			return nil, fmt.Errorf("kubectl kustomize %s: %s", path, bytes.TrimSpace(exitErr.Stderr))
		}
		if err != nil {
			return nil, fmt.Errorf("kubectl kustomize %s: %w", path, err)
		}
		return out, nil
	}
}

// Mode is one way to install fluxfed, and the release manifest that installs it.
type Mode struct {
	// Name is the chart's value of mode.
	Name string
	// File is the manifest's name under dist/.
	File string
	// Dirs are the kustomizations under deploy/ the manifest joins, in order.
	Dirs []string
}

// Modes are the release manifests: a single cluster, a hub, and a member (the operator and the
// identity a hub uses on the member, lent no namespace).
var Modes = []Mode{
	{Name: "single", File: "fluxfed.yaml", Dirs: []string{"default"}},
	{Name: "hub", File: "fluxfed-hub.yaml", Dirs: []string{"hub"}},
	{Name: "member", File: "fluxfed-member.yaml", Dirs: []string{"default", "member-access"}},
}

// Objects builds the kustomizations dirs and returns their objects in order. An object that an
// earlier kustomization already holds is left out when it is a Namespace (deploy/default and
// deploy/member-access both hold fluxfed-system; the first one, with its Pod Security label,
// stays); any other duplicate is an error.
func Objects(k Kustomizer, dirs ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	seen := map[string]string{}
	for _, dir := range dirs {
		out, err := k(dir)
		if err != nil {
			return nil, err
		}
		decoded, err := deploy.Decode(out)
		if err != nil {
			return nil, fmt.Errorf("deploy/%s: %w", dir, err)
		}
		for _, o := range decoded {
			id := strings.Join([]string{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}, "/")
			if first, dup := seen[id]; dup {
				if o.GetKind() == "Namespace" {
					continue
				}
				return nil, fmt.Errorf("%s %s is both in deploy/%s and deploy/%s", o.GetKind(), o.GetName(), first, dir)
			}
			seen[id] = dir
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// Manifest returns the release manifest of mode m: its objects as one YAML stream, after a
// header naming the version and the kustomizations it comes from.
func Manifest(k Kustomizer, m Mode, version string) ([]byte, error) {
	objs, err := Objects(k, m.Dirs...)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fluxfed %s, mode %s: built by `make release-manifests` from deploy/%s.\n",
		version, m.Name, strings.Join(m.Dirs, " and deploy/"))
	fmt.Fprintf(&b, "#   kubectl apply --server-side -f %s\n", m.File)
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

// WriteManifests writes the manifest of every mode into dir and returns their paths.
func WriteManifests(k Kustomizer, dir, version string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, m := range Modes {
		data, err := Manifest(k, m, version)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Name, err)
		}
		path := filepath.Join(dir, m.File)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// chartFile is a file of the chart that `make chart` copies from an object deploy/ builds.
type chartFile struct {
	path, dir, kind, name string
}

// chartFiles are the chart's generated files: paths under the chart, each with the
// kustomization and the object it copies.
var chartFiles = []chartFile{
	{"files/crds/miniclusters.yaml", "crd", "CustomResourceDefinition", "miniclusters.flux-framework.org"},
	{"files/crds/memberclusters.yaml", "hub", "CustomResourceDefinition", "memberclusters.fluxfed.io"},
	{"files/rbac/manager.yaml", "rbac", "ClusterRole", "fluxfed-manager"},
	{"files/rbac/leader-election.yaml", "rbac", "Role", "fluxfed-leader-election"},
	{"files/rbac/metrics-reader.yaml", "rbac", "ClusterRole", "fluxfed-metrics-reader"},
	{"files/rbac/hub.yaml", "hub", "ClusterRole", "fluxfed-hub"},
	{"files/rbac/hub-key.yaml", "hub", "Role", "fluxfed-hub"},
	{"files/rbac/hub-member.yaml", "member-access", "ClusterRole", "fluxfed-hub-member"},
	{"files/rbac/hub-burst.yaml", "member-access", "ClusterRole", "fluxfed-hub-burst"},
	{"files/rbac/hub-namespaces.yaml", "member-access-any", "ClusterRole", "fluxfed-hub-namespaces"},
	{"files/policy/deprecations.yaml", "policy", "ValidatingAdmissionPolicy", "fluxfed-minicluster-deprecations"},
	{"files/policy/deprecations-binding.yaml", "policy", "ValidatingAdmissionPolicyBinding", "fluxfed-minicluster-deprecations"},
}

// ChartFiles returns the generated files of the chart, by path under the chart's directory.
func ChartFiles(k Kustomizer) (map[string][]byte, error) {
	built := map[string][]*unstructured.Unstructured{}
	files := map[string][]byte{}
	for _, f := range chartFiles {
		if _, ok := built[f.dir]; !ok {
			objs, err := Objects(k, f.dir)
			if err != nil {
				return nil, err
			}
			built[f.dir] = objs
		}
		var found *unstructured.Unstructured
		for _, o := range built[f.dir] {
			if o.GetKind() == f.kind && o.GetName() == f.name {
				found = o
			}
		}
		if found == nil {
			return nil, fmt.Errorf("deploy/%s has no %s %s", f.dir, f.kind, f.name)
		}
		data, err := yaml.Marshal(found.Object)
		if err != nil {
			return nil, err
		}
		header := fmt.Sprintf("# Generated by `make chart` from %s %s of deploy/%s: do not edit.\n", f.kind, f.name, f.dir)
		files[f.path] = append([]byte(header), data...)
	}
	return files, nil
}

// WriteChartFiles writes the chart's generated files under chartDir.
func WriteChartFiles(k Kustomizer, chartDir string) error {
	files, err := ChartFiles(k)
	if err != nil {
		return err
	}
	for path, data := range files {
		full := filepath.Join(chartDir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
