package membership

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file is what Add does on the member: the hub's access (deploy/member-access and its
// variants), the namespaces it lends, the hub's token, and the kubeconfig made of it.

// accessDirs are the kustomizations of deploy/ that Add applies.
func (o *Options) accessDirs() []string {
	dirs := []string{"member-access"}
	if o.Access == AccessAny {
		dirs = []string{"member-access-any"}
	}
	if o.NonExpiringToken {
		dirs = append(dirs, "member-access-token")
	}
	return dirs
}

// accessObjects are the objects of dirs, each once, in order.
func accessObjects(dirs []string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, dir := range dirs {
		more, err := render(dir)
		if err != nil {
			return nil, err
		}
		for _, obj := range more {
			if name := describe(obj); !seen[name] {
				seen[name] = true
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// lending is what lending a namespace to the hub finds and does on the member.
type lending struct {
	ns string
	// nsMissing: the namespace does not exist (lend creates it).
	nsMissing bool
	// helm names the Helm release whose RoleBinding lends it already; lend leaves it alone.
	helm string
	// bound: a RoleBinding fluxfed-hub-burst existed there already.
	bound bool
}

// lendingOf reads what lending ns finds on the member.
func lendingOf(ctx context.Context, c client.Client, ns string) (lending, error) {
	l := lending{ns: ns}
	switch err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); {
	case apierrors.IsNotFound(err):
		l.nsMissing = true
		return l, nil
	case err != nil:
		return l, fmt.Errorf("reading namespace %s on the member: %w", ns, err)
	}
	rb := &rbacv1.RoleBinding{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: BurstRoleBinding}, rb); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return l, fmt.Errorf("reading RoleBinding %s/%s on the member: %w", ns, BurstRoleBinding, err)
	default:
		l.bound = true
		if release, helm := installedByHelm(rb); helm {
			l.helm = release
			if l.helm == "" {
				l.helm = "a Helm release"
			}
		}
	}
	return l, nil
}

// burstRoleBinding is the RoleBinding that lends namespace ns to the hub.
func burstRoleBinding(ns string) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(BurstRoleBinding, ns).
		WithLabels(map[string]string{LabelManagedBy: ManagedByCLI}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(BurstRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(AccessNamespace).WithName(ServiceAccount))
}

// lend creates namespace ns on the member if missing, and binds ClusterRole fluxfed-hub-burst
// there to the hub's ServiceAccount, unless Helm's chart bound it already.
func lend(ctx context.Context, c client.Client, l lending) error {
	if l.helm != "" {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.ns, Labels: map[string]string{LabelManagedBy: ManagedByCLI}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on the member: %w", l.ns, err)
	}
	if err := c.Apply(ctx, burstRoleBinding(l.ns), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("lending namespace %s: %w", l.ns, err)
	}
	return nil
}

// mint returns a token of the hub's ServiceAccount and when it expires: from the TokenRequest
// API, or, with NonExpiringToken, the token the member's controller wrote into the Secret of
// deploy/member-access-token (zero time).
func mint(ctx context.Context, cs kubernetes.Interface, o Options) (string, time.Time, error) {
	if o.NonExpiringToken {
		var token string
		err := retry(ctx, 30*time.Second, func() error {
			s, err := cs.CoreV1().Secrets(AccessNamespace).Get(ctx, TokenSecret, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if token = string(s.Data[corev1.ServiceAccountTokenKey]); token == "" {
				return fmt.Errorf("secret %s/%s has no token yet (the member's token controller fills it)", AccessNamespace, TokenSecret)
			}
			return nil
		})
		return token, time.Time{}, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(AccessNamespace).CreateToken(ctx, ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(o.TokenTTL / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("minting a token for ServiceAccount %s/%s: %w", AccessNamespace, ServiceAccount, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// lifetime says how long a token lasts: in days from two days on, else in minutes.
func lifetime(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Round(time.Hour)/(24*time.Hour)))
	}
	return d.Round(time.Minute).String()
}

// buildKubeconfig writes the kubeconfig the hub uses: the member's server, its CA inline, and
// the token.
func buildKubeconfig(o Options, token string) ([]byte, error) {
	ca := o.Member.CAData
	if len(ca) == 0 && o.Member.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(o.Member.CAFile); err != nil {
			return nil, fmt.Errorf("reading the member's CA: %w", err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[o.Name] = &clientcmdapi.Cluster{Server: o.MemberServer, CertificateAuthorityData: ca, TLSServerName: o.Member.ServerName}
	kc.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[o.Name] = &clientcmdapi.Context{Cluster: o.Name, AuthInfo: ServiceAccount}
	kc.CurrentContext = o.Name
	return clientcmd.Write(*kc)
}
