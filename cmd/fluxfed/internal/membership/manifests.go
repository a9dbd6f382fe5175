package membership

import (
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/deploy"
)

// kustomization is the part of a kustomization.yaml that the member-access directories use:
// a list of resources, files or directories. Anything else is refused, so that a kustomization
// that grows a patch fails the tests here rather than being applied without it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// render returns the objects of the kustomization deploy/<dir>, in the order kubectl
// kustomize lists them for these directories (resources in order, depth first), read from
// the manifests embedded in the binary.
func render(dir string) ([]*unstructured.Unstructured, error) {
	return renderFS(deploy.MemberAccess, dir, map[string]bool{})
}

func renderFS(fsys fs.FS, dir string, seen map[string]bool) ([]*unstructured.Unstructured, error) {
	if seen[dir] {
		return nil, fmt.Errorf("deploy/%s: the kustomizations include each other", dir)
	}
	seen[dir] = true
	data, err := fs.ReadFile(fsys, path.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("deploy/%s: %w", dir, err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("deploy/%s/kustomization.yaml uses more than resources: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		info, err := fs.Stat(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("deploy/%s: resource %s: %w", dir, r, err)
		}
		var more []*unstructured.Unstructured
		if info.IsDir() {
			more, err = renderFS(fsys, p, seen)
		} else {
			more, err = decode(fsys, p)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

func decode(fsys fs.FS, p string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	objs, err := deploy.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("deploy/%s: %w", p, err)
	}
	return objs, nil
}
