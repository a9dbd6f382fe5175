package admit

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidError is the refusal of a MiniCluster that decoded but did not validate: the API server's
// 422 Unprocessable Entity. Its message is the server's, as apierrors.NewInvalid words it
// (`MiniCluster.flux-framework.org "name" is invalid: [spec.size: Invalid value: 0: ...]`).
type InvalidError struct {
	// Kind is the kind the manifest claims, as the server names the object by it; MiniCluster when
	// empty. Only a manifest of the wrong kind makes it differ.
	Kind string
	// Name is metadata.name of the refused MiniCluster.
	Name string
	// Errs holds one error per cause, in the order the server finds them; each prints as one
	// line, `<field>: <message>`, as the server's status.details.causes say.
	Errs field.ErrorList
}

// Error returns the API server's message.
func (e *InvalidError) Error() string {
	return e.statusError().Error()
}

// Status returns the status the API server would answer with, so that apierrors.IsInvalid and
// apierrors.ReasonForError recognize the error.
func (e *InvalidError) Status() metav1.Status {
	return e.statusError().Status()
}

func (e *InvalidError) statusError() *apierrors.StatusError {
	gk := miniClusterKind.GroupKind()
	if e.Kind != "" {
		gk.Kind = e.Kind
	}
	return apierrors.NewInvalid(gk, e.Name, e.Errs)
}

// DecodeError is the refusal of a manifest that did not decode into a MiniCluster: not YAML or
// JSON, no kind, the wrong apiVersion, malformed metadata, or, under strict field validation, an
// unknown or duplicate field. The API server answers 400 Bad Request and validates nothing.
type DecodeError struct {
	// Message is the API server's message, e.g. `MiniCluster in version "v1alpha2" cannot be
	// handled as a MiniCluster: strict decoding error: unknown field "spec.x"`.
	Message string
	// Causes lists one problem per line: each unknown or duplicate field (`unknown field
	// "spec.x"`), or the one reason the manifest could not be decoded.
	Causes []string
	// Err is the decoder's error.
	Err error
}

// Error returns the API server's message.
func (e *DecodeError) Error() string {
	return e.Message
}

// Unwrap returns the decoder's error.
func (e *DecodeError) Unwrap() error {
	return e.Err
}

// Status returns the status the API server would answer with, so that apierrors.IsBadRequest
// recognizes the error.
func (e *DecodeError) Status() metav1.Status {
	return apierrors.NewBadRequest(e.Message).Status()
}
