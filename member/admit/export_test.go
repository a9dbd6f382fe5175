package admit

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AdmitUnstructured returns the admitted object before it is read into the Go type, whose
// omitempty fields drop defaults such as `interactive: false`, so that tests can compare it with
// what the API server stores field for field.
func AdmitUnstructured(manifest []byte) (*unstructured.Unstructured, error) {
	a, err := defaultAdmitter()
	if err != nil {
		return nil, err
	}
	return a.admitUnstructured(context.Background(), manifest)
}
