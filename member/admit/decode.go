package admit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decode turns the manifest into the object the create handler hands to the registry:
//
//  1. the strict serializer for the body's media type (YAML, or JSON when the body is JSON), as
//     handlers/create.go picks it for fieldValidation=Strict;
//  2. schemaCoercingDecoder and unstructuredSchemaCoercer.apply (customresource_handler.go): pruning
//     with the structural schema, every pruned field reported as `unknown field "<path>"`;
//  3. the versioning codec's defaulting (unstructuredDefaulter: structuraldefaulting.Default);
//  4. the handler's checks: a strict decoding error is a Bad Request (transformDecodeError), and so
//     is an apiVersion other than the one served (AcceptsGroupVersion).
func (a *admitter) decode(body []byte) (*unstructured.Unstructured, error) {
	decoder := a.yamlDecoder
	if utilyaml.IsJSONBuffer(body) {
		decoder = a.jsonDecoder
	}
	defaultGVK := a.kind
	obj, gvk, err := decoder.Decode(body, &defaultGVK, &unstructured.Unstructured{})
	var strictErrs []error
	if err != nil {
		strictErr, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			return nil, a.decodeError(err, gvk, body)
		}
		strictErrs = strictErr.Errors()
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, a.decodeError(fmt.Errorf("decoded %T, not an unstructured object", obj), gvk, body)
	}
	unknown, err := a.coerce(u)
	if err != nil {
		return nil, a.decodeError(err, gvk, body)
	}
	for _, path := range unknown {
		strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, path))
	}
	if len(strictErrs) > 0 {
		return nil, a.decodeError(runtime.NewStrictDecodingError(strictErrs), gvk, body)
	}

	if got := u.GroupVersionKind(); got.GroupKind() == a.kind.GroupKind() {
		structuraldefaulting.Default(u.Object, a.schemas[got.Version])
	}

	if gv := gvk.GroupVersion(); gv != a.kind.GroupVersion() {
		msg := fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)", gv, a.kind.GroupVersion())
		return nil, &DecodeError{Message: msg, Causes: []string{msg}, Err: errors.New(msg)}
	}
	return u, nil
}

// coerce is unstructuredSchemaCoercer.apply as the create handler configures it: malformed
// metadata is an error, unknown field paths are returned.
func (a *admitter) coerce(u *unstructured.Unstructured) ([]string, error) {
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if gv.Group == a.kind.Group && kind == a.kind.Kind {
		s := a.schemas[gv.Version]
		if !a.preserveUnknownFields {
			unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, s, true,
				structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
		}
		fieldErr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false,
			schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
		if fieldErr != nil {
			return nil, fieldErr
		}
		unknown = append(unknown, paths...)
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// decodeError is transformDecodeError (handlers/rest.go) for a MiniCluster endpoint.
func (a *admitter) decodeError(err error, gvk *schema.GroupVersionKind, body []byte) *DecodeError {
	var msg string
	if gvk != nil && gvk.Kind != "" {
		msg = fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, a.kind.Kind, err)
	} else {
		msg = fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", a.kind.Kind, err, summarizeData(body, 30))
	}
	causes := []string{err.Error()}
	if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
		causes = causes[:0]
		for _, e := range strictErr.Errors() {
			causes = append(causes, e.Error())
		}
	}
	return &DecodeError{Message: msg, Causes: causes, Err: err}
}

// summarizeData is the handler's summary of a body it cannot recognize.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// wipeObjectMetaSystemFields is rest.WipeObjectMetaSystemFields: the server assigns these.
func wipeObjectMetaSystemFields(u *unstructured.Unstructured) {
	u.SetCreationTimestamp(metav1.Time{})
	u.SetUID("")
	u.SetDeletionTimestamp(nil)
	u.SetDeletionGracePeriodSeconds(nil)
	u.SetSelfLink("")
}

// splitDocuments splits a YAML stream at its "---" separators; JSON is one document.
func splitDocuments(manifest []byte) ([][]byte, error) {
	if utilyaml.IsJSONBuffer(manifest) {
		return [][]byte{manifest}, nil
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("splitting the manifest into YAML documents: %w", err)
		}
		docs = append(docs, doc)
	}
}

// isEmptyDocument tells whether a YAML document holds nothing but comments and whitespace.
func isEmptyDocument(doc []byte) (bool, error) {
	data, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return false, err
	}
	return string(data) == "null", nil
}
