// Package membership registers member clusters on a fluxfed hub and removes them: what
// `fluxfed member add`, `fluxfed member remove` and `fluxfed member list` do. Add does in one call
// what docs/bursting.md ("Setting up") does by hand: it applies deploy/member-access (or
// deploy/member-access-any) to the member, lends it the namespaces asked for, mints a token
// for the hub's ServiceAccount there, builds a kubeconfig with the CA and the token inline
// (checked with the hub's own rules, hub/members.Check), creates the kubeconfig Secret and the
// MemberCluster on the hub, and waits until the hub reports the member Ready. It refuses a
// cluster already registered, by cluster ID (the UID of its kube-system namespace).
//
// add.go is Add's steps, in order, with options.go what it is told, access.go what it does on the
// member, registered.go what it reads and writes on the hub, chart.go the hub's identity that the
// Helm chart installed instead, datapath.go the check that the member's pods reach the lead
// broker (and the probe `fluxfed member probe` runs in the check's pod) and wait.go the wait for
// Ready. remove.go is Remove, list.go List, reach.go how both clusters are reached, and
// manifests.go the deploy/ manifests that are applied.
package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
)

// This file is the names Add and Remove use, their errors, and the helpers of every command.

// Names of what deploy/member-access installs on a member, and of what Add writes.
const (
	// FieldManager owns what Add applies, on the member and on the hub.
	FieldManager = fluxv1alpha2.FieldOwnerCLI
	// AccessNamespace holds the hub's ServiceAccount on a member.
	AccessNamespace = fedv1alpha1.FluxfedNamespace
	// ServiceAccount is the hub's identity on a member.
	ServiceAccount = "fluxfed-hub"
	// BurstRole is the ClusterRole a member's owner binds in a namespace to lend it to the hub.
	BurstRole = "fluxfed-hub-burst"
	// BurstRoleBinding is the name of the RoleBinding of BurstRole that lends a namespace.
	BurstRoleBinding = "fluxfed-hub-burst"
	// TokenSecret is the Secret of the token that never expires (deploy/member-access-token).
	TokenSecret = "fluxfed-hub-token"
	// KubeconfigKey is the key of the kubeconfig in its Secret on the hub.
	KubeconfigKey = members.DefaultKubeconfigKey
)

// ErrAlreadyRegistered is returned (wrapped) when the member, or its name, is registered on the
// hub already.
var ErrAlreadyRegistered = errors.New("already registered")

// ErrChildrenRemain is returned (wrapped) by Remove when children of a hub still exist on the
// member and Force is not set.
var ErrChildrenRemain = errors.New("children of a hub remain on the member")

// SecretName is the name of the kubeconfig Secret of the member called name.
func SecretName(name string) string { return name + "-kubeconfig" }

// scheme has the Kubernetes types and fluxfed's.
func scheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, fluxv1alpha2.AddToScheme, fedv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// printer writes a step of name.
type printer struct {
	out  io.Writer
	name string
}

func (p printer) say(format string, args ...any) {
	if p.out != nil {
		fmt.Fprintf(p.out, "%s: %s\n", p.name, fmt.Sprintf(format, args...))
	}
}

// describe names an object as the steps print it: "ClusterRole fluxfed-hub-member".
func describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() != "" {
		return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

// retry calls f until it succeeds or timeout passes, and returns its last error.
func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
