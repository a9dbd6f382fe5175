// Package membership registers member clusters on a fluxfed hub and removes them: what
// `fluxfed member add`, `fluxfed member remove` and `fluxfed member list` do. Add does in one call
// what docs/bursting.md ("Setting up") does by hand: it applies deploy/member-access (or
// deploy/member-access-any) to the member, lends it the namespaces asked for, mints a token
// for the hub's ServiceAccount there, builds a kubeconfig with the CA and the token inline
// (checked with the hub's own rules, hub/members.Check), creates the kubeconfig Secret and the
// MemberCluster on the hub, and waits until the hub reports the member Ready. It refuses a
// cluster already registered, by cluster ID (the UID of its kube-system namespace).
package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
)

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

// Access says what the hub's identity may do on the member: the choices deploy/ offers.
type Access string

const (
	// AccessNamespaces (the default) applies deploy/member-access, the least a member needs,
	// and lends the hub the namespaces of Options.Lend, one RoleBinding of ClusterRole
	// fluxfed-hub-burst in each.
	AccessNamespaces Access = "namespaces"
	// AccessAny applies deploy/member-access-any: every namespace is lent, and the hub may
	// create namespaces.
	AccessAny Access = "any"
)

// Defaults of Options.
const (
	// DefaultTokenTTL is how long the minted token lasts unless told otherwise: the API server
	// may shorten it (--service-account-max-token-expiration); Add says when it expires.
	DefaultTokenTTL = 30 * 24 * time.Hour
	// DefaultWait is how long Add waits for the hub to report the member Ready.
	DefaultWait = 2 * time.Minute
)

// Options say what Add does. The fields are plain values, one per flag of
// `fluxfed member add`.
type Options struct {
	// Name is the member's name on the hub: the MemberCluster's, the one bursts name in
	// spec.flux.bursting.clusters[].cluster. Required.
	Name string
	// Hub reaches the hub cluster as someone who may create MemberClusters and Secrets in
	// Namespace. Required.
	Hub *rest.Config
	// Member reaches the member cluster as someone who may create ServiceAccounts, ClusterRoles,
	// bindings and tokens (its administrator). Required. Its credentials never reach the hub.
	Member *rest.Config
	// MemberServer is the member API server's URL as the hub reaches it; default Member.Host.
	MemberServer string
	// Namespace is where the hub reads member kubeconfigs (its --members-namespace); default
	// fluxfed-system.
	Namespace string
	// Access is what the hub may do on the member; default AccessNamespaces.
	Access Access
	// Lend are the member namespaces roots may burst into (with AccessNamespaces): each is
	// created if missing, and gets the RoleBinding fluxfed-hub-burst.
	Lend []string
	// Allow is the MemberCluster's spec.namespaces.allow: Mirror, Listed or Any. Default Any
	// with AccessAny, else Mirror (the CRD's default: a root bursts only into the lent namespace
	// named like its own). Listed lists Lend, for every root of the hub.
	Allow fedv1alpha1.NamespaceAllow
	// CreateNamespaces lets the hub create a burst's namespace (spec.namespaces.create); only
	// with AccessAny, which gives it the right to.
	CreateNamespaces bool
	// PodSecurity is the MemberCluster's spec.podSecurity.level; default baseline.
	PodSecurity fedv1alpha1.PodSecurityLevel
	// TokenTTL is how long the hub's token lasts; default DefaultTokenTTL. Replace the
	// kubeconfig Secret before it expires (running Add's steps again, or by hand).
	TokenTTL time.Duration
	// NonExpiringToken applies deploy/member-access-token and uses the token of its Secret,
	// which lasts until the Secret is deleted, instead of minting one that expires.
	NonExpiringToken bool
	// Wait is how long to wait for the hub to report the member Ready; default DefaultWait,
	// negative not to wait.
	Wait time.Duration
	// HubContext and MemberContext name the kubeconfig contexts of Hub and Member, for the
	// messages ("" for the current context).
	HubContext, MemberContext string
	// ReachTimeout bounds the first request to each cluster; default DefaultReachTimeout.
	ReachTimeout time.Duration
	// UnreachableGrace is how long a member the hub reports Unreachable is waited for before
	// Add gives up on it; default DefaultUnreachableGrace.
	UnreachableGrace time.Duration
	// DryRun reads both clusters and checks everything Add would check, then says what it
	// would create, and creates nothing. With Output "yaml" or "json" it also prints the
	// objects (the kubeconfig with a placeholder instead of a token).
	DryRun bool
	Output string
	// CheckEndpoints are the lead broker endpoints (HOST:PORT) the data-path check greets from
	// a pod on the member; the endpoints the hub advertises for its roots now are added.
	CheckEndpoints []string
	// SkipDataPathCheck skips the data-path check.
	SkipDataPathCheck bool
	// CheckImage is the image of the check's pod; default the image of the member's fluxfed
	// manager (Deployment fluxfed-system/fluxfed-manager).
	CheckImage string
	// CheckTimeout bounds the data-path check; default DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Out receives one line per step; nothing when nil.
	Out io.Writer
}

// Result is what Add did.
type Result struct {
	// ClusterID is the member's cluster ID.
	ClusterID string
	// TokenExpires is when the hub's token expires; zero for a token that never does.
	TokenExpires time.Time
	// Registered is when the MemberCluster was created on the hub.
	Registered time.Time
	// Ready is when Add saw the hub report the member Ready; zero when it did not wait.
	Ready time.Time
	// Elapsed is the time from the start of Add to Ready (or to its end, without waiting).
	Elapsed time.Duration
	// Chart is true when Add used the hub's identity that the Helm chart installed on the
	// member.
	Chart bool
	// DataPath is what the data-path check found.
	DataPath DataPath
}

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

func (o *Options) defaults() error {
	if o.Name == "" {
		return errors.New("the member needs a name")
	}
	if o.Hub == nil || o.Member == nil {
		return errors.New("both the hub's and the member's configuration are needed")
	}
	if o.MemberServer == "" {
		o.MemberServer = o.Member.Host
	}
	if o.Namespace == "" {
		o.Namespace = members.DefaultNamespace
	}
	if o.Access == "" {
		o.Access = AccessNamespaces
	}
	if o.Access != AccessNamespaces && o.Access != AccessAny {
		return fmt.Errorf("access %q: want %q or %q", o.Access, AccessNamespaces, AccessAny)
	}
	if o.Allow == "" {
		o.Allow = fedv1alpha1.NamespaceAllowMirror
		if o.Access == AccessAny {
			o.Allow = fedv1alpha1.NamespaceAllowAny
		}
	}
	switch o.Allow {
	case fedv1alpha1.NamespaceAllowMirror:
	case fedv1alpha1.NamespaceAllowListed:
		if len(o.Lend) == 0 {
			return errors.New("allow Listed lists the lent namespaces: name at least one to lend")
		}
	case fedv1alpha1.NamespaceAllowAny:
		if o.Access != AccessAny {
			return errors.New("allow Any needs access any: the hub watches every namespace of the member")
		}
	default:
		return fmt.Errorf("allow %q: want Mirror, Listed or Any", o.Allow)
	}
	if o.Access == AccessAny && len(o.Lend) > 0 {
		return errors.New("access any lends every namespace already: name none to lend")
	}
	for _, ns := range o.Lend {
		if fedv1alpha1.IsReservedNamespace(ns) {
			return fmt.Errorf("namespace %s is never burst into: it cannot be lent", ns)
		}
	}
	if o.CreateNamespaces && o.Access != AccessAny {
		return errors.New("letting the hub create namespaces needs access any, which gives it the right to")
	}
	if o.PodSecurity == "" {
		o.PodSecurity = fedv1alpha1.PodSecurityBaseline
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.TokenTTL < 10*time.Minute && !o.NonExpiringToken {
		return fmt.Errorf("token lifetime %v: the API server accepts no less than 10m", o.TokenTTL)
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.ReachTimeout <= 0 {
		o.ReachTimeout = DefaultReachTimeout
	}
	if o.UnreachableGrace <= 0 {
		o.UnreachableGrace = DefaultUnreachableGrace
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	switch o.Output {
	case "", "yaml", "json":
	default:
		return fmt.Errorf("output %q: want yaml or json", o.Output)
	}
	if o.Output != "" && !o.DryRun {
		return errors.New("printing the objects (yaml or json) is for a dry run: add --dry-run")
	}
	if o.SkipDataPathCheck && len(o.CheckEndpoints) > 0 {
		return errors.New("skipping the data-path check and naming endpoints to check contradict each other: drop one")
	}
	return ValidateEndpoints(o.CheckEndpoints)
}

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

// lifetime says how long a token lasts: in days from two days on, else in minutes.
func lifetime(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Round(time.Hour)/(24*time.Hour)))
	}
	return d.Round(time.Minute).String()
}

func listed(o Options) string {
	if o.Allow == fedv1alpha1.NamespaceAllowListed {
		return " " + strings.Join(o.Lend, ",")
	}
	if o.CreateNamespaces {
		return ", create"
	}
	return ""
}

// describe names an object as the steps print it: "ClusterRole fluxfed-hub-member".
func describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() != "" {
		return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

// clusterID is what the hub computes: the UID of the kube-system namespace.
func clusterID(ctx context.Context, cs kubernetes.Interface) (string, error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.UID), nil
}

// refuseRegistered returns ErrAlreadyRegistered when a MemberCluster has the name, or has
// recorded the cluster ID, or another MemberCluster uses the Secret Add would write. A member
// the hub has not reached yet has no cluster ID recorded: it is refused too when its kubeconfig
// leads to the same server, the best that can be told without the hub's answer.
func refuseRegistered(ctx context.Context, hubClient client.Client, name, id, server, namespace string) error {
	var list fedv1alpha1.MemberClusterList
	if err := hubClient.List(ctx, &list); err != nil {
		return fmt.Errorf("listing the hub's members: %w", err)
	}
	for _, mc := range list.Items {
		switch {
		case mc.Name == name:
			return fmt.Errorf("member %s: %w on the hub (cluster ID %s)", name, ErrAlreadyRegistered, orUnknown(mc.Status.ClusterID))
		case mc.Status.ClusterID == id:
			return fmt.Errorf("cluster %s: %w on the hub as member %s", id, ErrAlreadyRegistered, mc.Name)
		case mc.Spec.KubeconfigSecretRef.Name == SecretName(name):
			return fmt.Errorf("member %s uses Secret %s/%s already: %w", mc.Name, namespace, SecretName(name), ErrAlreadyRegistered)
		case mc.Status.ClusterID == "" && serverOf(ctx, hubClient, namespace, mc) == server:
			return fmt.Errorf("member %s, whose cluster ID the hub has not read yet, has a kubeconfig for %s: %w", mc.Name, server, ErrAlreadyRegistered)
		}
	}
	return nil
}

// serverOf returns the server of the kubeconfig of mc, or "" when it cannot be read or the hub
// would refuse it.
func serverOf(ctx context.Context, hubClient client.Client, namespace string, mc fedv1alpha1.MemberCluster) string {
	secret := &corev1.Secret{}
	if err := hubClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: mc.Spec.KubeconfigSecretRef.Name}, secret); err != nil {
		return ""
	}
	key := mc.Spec.KubeconfigSecretRef.Key
	if key == "" {
		key = KubeconfigKey
	}
	cfg, err := members.Check(secret.Data[key])
	if err != nil {
		return ""
	}
	return cfg.Host
}

func orUnknown(s string) string {
	if s == "" {
		return "not known yet"
	}
	return s
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

// memberCluster is the MemberCluster Add applies.
func memberCluster(o Options) (*unstructured.Unstructured, error) {
	mc := &fedv1alpha1.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: fedv1alpha1.GroupVersion.String(), Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: map[string]string{LabelManagedBy: ManagedByCLI}},
		Spec: fedv1alpha1.MemberClusterSpec{
			KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: SecretName(o.Name), Key: KubeconfigKey},
			Namespaces:          fedv1alpha1.MemberNamespaces{Allow: o.Allow, Create: o.CreateNamespaces},
			PodSecurity:         fedv1alpha1.MemberPodSecurity{Level: o.PodSecurity},
		},
	}
	if o.Allow == fedv1alpha1.NamespaceAllowListed {
		for _, ns := range o.Lend {
			mc.Spec.Namespaces.Names = append(mc.Spec.Namespaces.Names, fedv1alpha1.MemberNamespaceName(ns))
		}
	}
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(mc)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
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
