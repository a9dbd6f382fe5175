package members

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// This file finds out what a member that answers lacks to take bursts: the MiniCluster API
// (fluxfed installed), the namespaces roots burst into, credentials that last.

// MiniClusterCRD is the CustomResourceDefinition a member needs to take bursts.
const MiniClusterCRD = "miniclusters.flux-framework.org"

// InstallHint says how a member's owner installs fluxfed there.
const InstallHint = "install fluxfed on the member: kubectl apply --server-side -k deploy/default, " +
	"or the chart with --set mode=member"

// ExpiryWindow is how long before its credentials expire a member is warned about
// (CredentialsValid=False).
const ExpiryWindow = 24 * time.Hour

// crdState is what the hub last found of a member's MiniCluster API.
type crdState int

const (
	crdUnknown crdState = iota
	crdServed
	crdMissing
)

// servesMiniClusters asks the member's discovery whether it serves the MiniCluster resource of
// the version the hub pushes; every authenticated identity may ask (system:discovery).
func servesMiniClusters(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	var list metav1.APIResourceList
	err := cs.Discovery().RESTClient().Get().AbsPath("/apis", fluxv1alpha2.GroupVersion.Group, fluxv1alpha2.GroupVersion.Version).
		Do(ctx).Into(&list)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("asking the member whether it serves %s: %w", fluxv1alpha2.GroupVersion, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "miniclusters" }), nil
}

// fluxfedMissing is the message of a member without the MiniCluster API.
func fluxfedMissing() string {
	return fmt.Sprintf("the member answers but does not serve the MiniCluster API (CustomResourceDefinition %s, %s): "+
		"fluxfed is not installed there, and no burst can run there; %s", MiniClusterCRD, fluxv1alpha2.GroupVersion, InstallHint)
}

// namespaceReport is what the hub found of the namespaces roots use on a member.
type namespaceReport struct {
	// checked is false until the namespaces were looked at with the current kubeconfig.
	checked bool
	// missing do not exist (the hub may read namespaces there and got NotFound); unlent are
	// those where the hub may not list MiniClusters and Secrets, and cannot tell whether they
	// exist.
	missing, unlent []string
}

// checkNamespaces looks at each namespace: one the hub may read and that is not found is
// missing (unless the hub may create it); one the hub may not read is unlent when the hub may
// not watch there either. The hub's member identity may read only kube-system
// (deploy/member-access), so for the others it cannot tell a missing namespace from one not
// lent, and says so.
func checkNamespaces(ctx context.Context, cs kubernetes.Interface, namespaces []string, create bool) (namespaceReport, error) {
	rep := namespaceReport{checked: true}
	for _, ns := range namespaces {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			continue
		case apierrors.IsNotFound(err):
			if !create {
				rep.missing = append(rep.missing, ns)
			}
			continue
		case !apierrors.IsForbidden(err):
			return namespaceReport{}, fmt.Errorf("reading namespace %s on the member: %w", ns, err)
		}
		may, err := mayWatch(ctx, cs, ns)
		if err != nil {
			return namespaceReport{}, err
		}
		if !may {
			rep.unlent = append(rep.unlent, ns)
		}
	}
	return rep, nil
}

// tokenExpiry returns when a bearer token expires: the exp claim of a JWT, read without
// verifying the token (the member's API server does that); false when the token is not a JWT or
// has no exp.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 || exp > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0).UTC(), true
}

// credentialsExpiry returns when the credentials of cfg expire, and what they are: the exp
// claim of its bearer token, or else the end of its client certificate's validity; zero when
// neither says.
func credentialsExpiry(cfg *rest.Config) (time.Time, string) {
	if exp, ok := tokenExpiry(cfg.BearerToken); ok {
		return exp, "token"
	}
	if block, _ := pem.Decode(cfg.CertData); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			return cert.NotAfter.UTC(), "client certificate"
		}
	}
	return time.Time{}, ""
}

// renewHint says how to give the hub new credentials for a member whose kubeconfig is in
// Secret secret ("namespace/name").
func renewHint(secret string) string {
	where := "the member's kubeconfig Secret"
	if secret != "" {
		where = "Secret " + secret
	}
	return "mint a new token on the member (kubectl create token fluxfed-hub -n fluxfed-system --duration=720h) " +
		"and put it in the kubeconfig of " + where + "; the hub uses it at its next health check, without a restart"
}

func (a namespaceReport) equal(b namespaceReport) bool {
	return a.checked == b.checked && slices.Equal(a.missing, b.missing) && slices.Equal(a.unlent, b.unlent)
}
