package hub

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/policy"
	"github.com/fluxfed/fluxfed/internal/apply"
)

// What goes wrong in a reconcile of a root is one error, whose type says what the root's status
// reports and whether a retry can help; reasonOf reads the condition reason of any of them, and
// fromMember gives one met pushing to a member its reason:
//
//   - *burstError: a burst cannot be applied for a reason the hub found itself (its member is
//     not registered or not ready, the hub could not record what it is about to create, ...).
//     It carries its reason.
//   - *apply.Refusal: a member's or the hub's API server refused an object (ApplyFailed,
//     ImmutableFieldChanged), or an object of that name is not the hub's (Conflict).
//   - *policy.NamespaceError, *policy.PodSecurityError: the member's owner does not allow the
//     burst (NamespaceNotAllowed, PodSecurityViolation). What was pushed for it is withdrawn.
//   - *waitError: a burst waits for an object of a root that is gone to be deleted. Nothing
//     failed; the burst is retried soon.
//   - *invalidError: the root's bursts cannot be planned (InvalidFederation). Only a change of
//     the spec helps: the reconcile ends in a terminal error.
//   - *unreadableError: flux answered in the lead broker's container, and the hub cannot read
//     the answer. It decides no scaling step until it can.
//   - anything else met pushing to a member becomes a *burstError (fromMember): an API status
//     of 4xx but a timeout or throttling is the member's answer (ApplyFailed); no answer, or
//     one that it could not serve, is MemberUnreachable. Both are retried with backoff. Any
//     other error of a burst is ApplyFailed.

// burstError is why a burst cannot be applied, with the condition reason that says so.
type burstError struct {
	// reason is a fluxv1alpha2 reason constant.
	reason string
	err    error
}

func (e *burstError) Error() string { return e.err.Error() }

func (e *burstError) Unwrap() error { return e.err }

// failed returns err as a burst's failure with reason.
func failed(reason string, err error) error { return &burstError{reason: reason, err: err} }

// reasonOf returns the condition reason err carries (see above); an error that carries none is
// ApplyFailed.
func reasonOf(err error) string {
	if reason, ok := carried(err); ok {
		return reason
	}
	return fluxv1alpha2.ReasonApplyFailed
}

// carried returns the reason of a typed error: a burst's, a refusal's or the member owner's.
func carried(err error) (reason string, ok bool) {
	var own *burstError
	var refusal *apply.Refusal
	switch {
	case errors.As(err, &own):
		return own.reason, true
	case errors.As(err, &refusal):
		return refusal.Reason, true
	}
	return ownerRefusal(err)
}

// fromMember returns err, met while pushing to a member, with a reason: its own, else
// ApplyFailed when the member answered and refused (an API status of 4xx but a timeout or
// throttling), else MemberUnreachable: it did not answer, or answered that it could not serve.
func fromMember(err error) error {
	if _, ok := carried(err); ok {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500 &&
		!apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) {
		return failed(fluxv1alpha2.ReasonApplyFailed, err)
	}
	return failed(fluxv1alpha2.ReasonMemberUnreachable, err)
}

// ownerRefusal returns the reason of a refusal by the member owner's policy: the namespace, or
// the pods' Pod Security level; ok is false for any other error.
func ownerRefusal(err error) (reason string, ok bool) {
	var nsErr *policy.NamespaceError
	var podErr *policy.PodSecurityError
	switch {
	case errors.As(err, &nsErr):
		return fluxv1alpha2.ReasonNamespaceNotAllowed, true
	case errors.As(err, &podErr):
		return fluxv1alpha2.ReasonPodSecurityViolation, true
	}
	return "", false
}

// isRefusal reports whether err is a refusal to apply, which is reported, not retried as is.
func isRefusal(err error) bool {
	var refusal *apply.Refusal
	return errors.As(err, &refusal)
}

// waitError is why a burst waits without failing: an object of its child's name that the hub
// created for a root that is gone is being deleted.
type waitError struct{ message string }

func (e *waitError) Error() string { return e.message }

// invalidError is a federation that cannot be planned: retrying cannot help, a change of the
// spec can.
type invalidError struct{ error }

func (e *invalidError) Unwrap() error { return e.error }

// unreadableError is an answer of flux that the hub cannot read.
type unreadableError struct{ error }

func (e *unreadableError) Unwrap() error { return e.error }

// errorText is the message of err, empty for none.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
