package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
	psaapi "k8s.io/pod-security-admission/api"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/internal/text"
)

// NamespaceError is a burst's namespace that its member does not allow. Field is the
// MemberCluster field (or, for a name that is no namespace name, the burst's) that decides.
type NamespaceError struct {
	// Namespace is the namespace the burst would use on the member, as given.
	Namespace string
	// Field is the field that refuses it, e.g. "spec.namespaces.allow".
	Field string
	// Reason says why, and what is allowed instead.
	Reason string
}

func (e *NamespaceError) Error() string {
	return text.Truncate(fmt.Sprintf("namespace %s is not allowed on this member (%s): %s", quoteName(e.Namespace), e.Field, e.Reason), MaxMessageLength)
}

// quoteName quotes a namespace name for a message, cut after 63 bytes (the longest valid name)
// so that a hostile one cannot push the rest of the message out.
func quoteName(name string) string {
	const maxName = 63
	if len(name) <= maxName {
		return strconv.Quote(name)
	}
	end := maxName
	for end > 0 && !utf8.RuneStart(name[end]) {
		end--
	}
	return strconv.Quote(name[:end]) + "..."
}

// maxListed is how many allowed namespaces a refusal names before it says how many more there
// are.
const maxListed = 8

// Namespace returns nil when a root in rootNamespace (its namespace on the hub) may burst into
// namespace on a member whose MemberCluster has spec.namespaces ns, and a *NamespaceError that
// names the deciding field and says what is allowed otherwise. A kube- namespace and
// fluxfed-system are refused whatever ns says; so is a name that is not a namespace name (with
// capitals, spaces, too long, ...), which no comparison below could then be trusted with. An
// unset ns.Allow is the schema's default, Mirror; an unknown one allows nothing.
func Namespace(ns fedv1alpha1.MemberNamespaces, rootNamespace, namespace string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return &NamespaceError{Namespace: namespace, Field: "spec.flux.bursting.clusters[].namespace",
			Reason: "not a namespace name: " + strings.Join(errs, "; ")}
	}
	if fedv1alpha1.IsReservedNamespace(namespace) {
		return &NamespaceError{Namespace: namespace, Field: "spec.namespaces",
			Reason: fmt.Sprintf("%s namespaces and %s are never burst into, whatever the MemberCluster says",
				fedv1alpha1.ReservedNamespacePrefix, fedv1alpha1.FluxfedNamespace)}
	}
	switch ns.Allow {
	case fedv1alpha1.NamespaceAllowMirror, "":
		if namespace != rootNamespace {
			return &NamespaceError{Namespace: namespace, Field: "spec.namespaces.allow",
				Reason: fmt.Sprintf("the MemberCluster allows Mirror: a root in namespace %s may burst only into namespace %s",
					quoteName(rootNamespace), quoteName(rootNamespace))}
		}
		return nil
	case fedv1alpha1.NamespaceAllowListed:
		for _, name := range ns.Names {
			if string(name) == namespace {
				return nil
			}
		}
		reason := "the MemberCluster allows only " + quoteList(ns.Names)
		if len(ns.Names) == 0 {
			reason = "the MemberCluster lists no namespace"
		}
		return &NamespaceError{Namespace: namespace, Field: "spec.namespaces.names", Reason: reason}
	case fedv1alpha1.NamespaceAllowAny:
		return nil
	default:
		return &NamespaceError{Namespace: namespace, Field: "spec.namespaces.allow",
			Reason: fmt.Sprintf("%s is not a known policy (Mirror, Listed or Any): nothing is allowed", quoteName(string(ns.Allow)))}
	}
}

// MayCreateNamespace reports whether the hub may create a burst's namespace that does not exist
// on the member. Namespace must have allowed the namespace first.
func MayCreateNamespace(ns fedv1alpha1.MemberNamespaces) bool {
	return ns.Create
}

// NamespaceMissing is the refusal of a burst into a namespace that does not exist on a member
// whose MemberCluster does not let the hub create it.
func NamespaceMissing(namespace string) error {
	return &NamespaceError{Namespace: namespace, Field: "spec.namespaces.create",
		Reason: "it does not exist, and the MemberCluster does not let the hub create namespaces: the member's owner creates it, or sets spec.namespaces.create"}
}

// NamespaceLabels are the labels of a namespace the hub creates on a member whose pods must meet
// level: the Pod Security Admission enforce label and its version, latest, so that the member
// enforces what the hub checked. An unset level is the schema's default, baseline.
func NamespaceLabels(level fedv1alpha1.PodSecurityLevel) map[string]string {
	if level == "" {
		level = fedv1alpha1.PodSecurityBaseline
	}
	return map[string]string{
		psaapi.EnforceLevelLabel:   string(level),
		psaapi.EnforceVersionLabel: psaapi.VersionLatest,
	}
}

// quoteList quotes the names, at most maxListed of them.
func quoteList(names []fedv1alpha1.MemberNamespaceName) string {
	quoted := make([]string, 0, min(len(names), maxListed))
	for _, n := range names[:min(len(names), maxListed)] {
		quoted = append(quoted, quoteName(string(n)))
	}
	s := strings.Join(quoted, ", ")
	if more := len(names) - maxListed; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
