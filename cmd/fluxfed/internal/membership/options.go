package membership

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/members"
)

// This file is what Add is told (Options, defaulted and checked before anything is read) and
// what it returns (Result).

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

func listed(o Options) string {
	if o.Allow == fedv1alpha1.NamespaceAllowListed {
		return " " + strings.Join(o.Lend, ",")
	}
	if o.CreateNamespaces {
		return ", create"
	}
	return ""
}
