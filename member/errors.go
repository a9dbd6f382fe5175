package member

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
)

// A reconcile ends in one error, and its type says both what the status reports and whether a
// retry can help:
//
//   - *apply.Refusal: the API server refused an object (ApplyFailed, ImmutableFieldChanged), or
//     an object of that name is not this MiniCluster's (Conflict). Failed=True.
//   - *invalidSpecError: the spec cannot be rendered (InvalidSpec). Failed=True.
//   - *waitError: something another party provides is not there yet (CurveSecretPending), or
//     something it must take away is still there (EarlierObjectsPending).
//     Ready=False, and nothing failed.
//   - anything else: the API server could not be read or written. The status is left as it
//     was, since what was observed is incomplete, and the reconcile is retried.

// invalidSpecError is a spec that passed the schema but cannot be rendered into a working Flux
// instance. Only a change of the spec fixes it.
type invalidSpecError struct{ err error }

func (e *invalidSpecError) Error() string { return e.err.Error() }

func (e *invalidSpecError) Unwrap() error { return e.err }

// waitError is a wait on someone else: the reconcile cannot go on until another party provides
// something, and a watch brings the MiniCluster back when it does.
type waitError struct {
	// reason is the Ready=False reason, a fluxv1alpha2 reason constant.
	reason  string
	message string
}

func (e *waitError) Error() string { return e.message }

// failureOf returns the Failed=True reason and message err carries; ok is false for a wait and
// for an error the status cannot name.
func failureOf(err error) (reason, message string, ok bool) {
	var refusal *apply.Refusal
	var invalid *invalidSpecError
	switch {
	case errors.As(err, &refusal):
		return refusal.Reason, refusal.Error(), true
	case errors.As(err, &invalid):
		return fluxv1alpha2.ReasonInvalidSpec, invalid.Error(), true
	}
	return "", "", false
}

// reported tells whether the status can say what err means: no error, a failure or a wait.
func reported(err error) bool {
	var wait *waitError
	_, _, failed := failureOf(err)
	return err == nil || failed || errors.As(err, &wait)
}

// outcome is what Reconcile returns for the reconcile's error. A wait is no error: the watch of
// what it waits for brings the MiniCluster back. What a retry cannot fix is terminal: the next
// change of the spec is what helps. A Conflict is retried with the controller's backoff, since
// the other object may go away, and so is any error the status cannot name.
func outcome(err error) error {
	var wait *waitError
	if err == nil || errors.As(err, &wait) {
		return nil
	}
	if reason, _, failed := failureOf(err); failed && reason != fluxv1alpha2.ReasonConflict {
		return reconcile.TerminalError(err)
	}
	return err
}
