package hub

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/policy"
	"github.com/fluxfed/fluxfed/member/apply"
)

// invalidError is a federation that cannot be planned: retrying cannot help, a change of the
// spec can.
type invalidError struct{ error }

func (e *invalidError) Unwrap() error { return e.error }

// reasonOf returns the condition reason of err: a refusal's own, else fallback.
func reasonOf(err error, fallback string) string {
	var refusal *apply.Refusal
	if errors.As(err, &refusal) {
		return refusal.Reason
	}
	return fallback
}

// waitError is why a burst waits without failing: an object of its child's name that the hub
// created for a root that is gone is being deleted.
type waitError struct{ message string }

func (e *waitError) Error() string { return e.message }

// classify returns the condition reason of an error met pushing to a member: a refusal's own
// reason, ApplyFailed when the member answered and refused, MemberUnreachable when it did not
// answer (or answered that it could not serve).
func classify(err error) string {
	var refusal *apply.Refusal
	if errors.As(err, &refusal) {
		return refusal.Reason
	}
	if reason := policyReason(err); reason != fluxv1alpha2.ReasonInvalidSpec {
		return reason
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500 &&
		!apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) {
		return fluxv1alpha2.ReasonApplyFailed
	}
	return fluxv1alpha2.ReasonMemberUnreachable
}

// policyReason returns the condition reason of a refusal by the member's policy: the namespace,
// the pods' Pod Security level, or else a child that cannot be rendered to be checked.
func policyReason(err error) string {
	var nsErr *policy.NamespaceError
	var podErr *policy.PodSecurityError
	switch {
	case errors.As(err, &nsErr):
		return fluxv1alpha2.ReasonNamespaceNotAllowed
	case errors.As(err, &podErr):
		return fluxv1alpha2.ReasonPodSecurityViolation
	}
	return fluxv1alpha2.ReasonInvalidSpec
}

// unreadableError is an answer of flux that the hub cannot read.
type unreadableError struct{ error }

func (e *unreadableError) Unwrap() error { return e.error }

// isRefusal reports whether err is a refusal to apply, which is reported, not retried as is.
func isRefusal(err error) bool {
	var refusal *apply.Refusal
	return errors.As(err, &refusal)
}
