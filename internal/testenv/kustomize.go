package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxfed/fluxfed/deploy"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
)

// Kustomize builds a kustomization under deploy/ (for example "hub") with kubectl and returns
// its objects in order.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	bin, err := k8sbin.Dir("kubectl")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(RepoRoot(), "deploy", dir)
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", path).Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return nil, fmt.Errorf("kubectl kustomize %s: %s", path, exitErr.Stderr)
	}
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w", path, err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		return nil, fmt.Errorf("decoding kubectl kustomize %s: %w", path, err)
	}
	return objs, nil
}

// ApplyDeploy server-side applies the kustomization deploy/<dir> to the API server, except its
// CustomResourceDefinitions (Start installed them) and Deployments (tests run the manager
// in-process). It is how tests give the manager exactly the permissions a user installs.
func (e *Env) ApplyDeploy(ctx context.Context, dir string) error {
	objs, err := Kustomize(dir)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if k := o.GetKind(); k == "CustomResourceDefinition" || k == "Deployment" {
			continue
		}
		if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("fluxfed-test"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from deploy/%s: %w", o.GetKind(), o.GetName(), dir, err)
		}
	}
	return nil
}
