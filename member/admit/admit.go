// Package admit decides offline what the API server would do with a MiniCluster manifest on
// create: refuse it, with the messages the server would give, or store it, with the schema
// defaults filled in. `fluxfed plan` renders from what Admit returns, so a plan never shows a
// MiniCluster the cluster would not accept, nor one that differs from what the cluster would keep.
//
// Admit runs the API server's own code for custom resources (k8s.io/apiextensions-apiserver) over
// the CRD embedded from deploy/crd, in the order the server runs it for a POST with
// fieldValidation=Strict; no API server process is involved. Admission webhooks and policies that a
// real cluster may add are out of its reach.
package admit

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/deploy/crd"
)

// miniClusterKind is the kind Admit accepts; the embedded CRD must serve it.
var miniClusterKind = fluxv1alpha2.GroupVersion.WithKind("MiniCluster")

// Admit decodes a MiniCluster manifest (YAML or JSON), applies the CRD's structural schema defaults, prunes nothing silently (unknown fields are errors, as strict field validation), and validates it with the OpenAPI schema and the CEL rules, returning the typed, defaulted object or a field.ErrorList-style error whose messages match the API server's.
//
// The manifest holds one object; documents of comments only are skipped. metadata.name is
// required (Admit does not make up names for generateName); metadata.namespace defaults to
// "default", as if the manifest were created there. The returned object is what the server would
// store, less what only the server assigns (uid, creationTimestamp, resourceVersion,
// managedFields): defaults filled in, status dropped, generation 1.
//
// A refusal is a *DecodeError where the server answers 400 Bad Request (not a MiniCluster, or
// unknown or duplicate fields) or an *InvalidError where it answers 422 Unprocessable Entity. Both
// implement apierrors.APIStatus, so apierrors.IsInvalid and apierrors.IsBadRequest work on them.
// The one other refusal is the server's own: a manifest that sets metadata.resourceVersion gets
// the storage layer's 500 as an *apierrors.StatusError.
func Admit(manifest []byte) (*fluxv1alpha2.MiniCluster, error) {
	a, err := defaultAdmitter()
	if err != nil {
		return nil, err
	}
	return a.admit(context.Background(), manifest)
}

// defaultAdmitter builds the admitter for the embedded CRD once: converting the schema and
// compiling the CEL programs takes tens of milliseconds, admitting a manifest about one.
var defaultAdmitter = sync.OnceValues(func() (*admitter, error) {
	a, err := newAdmitter(crd.MiniClusters)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded MiniCluster CRD: %w", err)
	}
	return a, nil
})

// admitter holds what the API server's CRD handler builds per served version of a CRD
// (customresource_handler.go, getOrCreateServingInfoFor): the structural schema with its defaults
// pruned, the OpenAPI schema validator, the CEL validator, and the subresources.
type admitter struct {
	kind       schema.GroupVersionKind
	namespaced bool
	// preserveUnknownFields is spec.preserveUnknownFields of the CRD (false for ours).
	preserveUnknownFields bool
	// schemas are the structural schemas by version, as the handler keeps them; the defaulter and
	// the pruner look the decoded object's version up in it, as they do in the server.
	schemas    map[string]*structuralschema.Structural
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
	status     *apiextensionsinternal.CustomResourceSubresourceStatus
	scale      *apiextensionsinternal.CustomResourceSubresourceScale

	// yamlDecoder and jsonDecoder are the strict serializers the server picks for a body of
	// Content-Type application/yaml and application/json under fieldValidation=Strict.
	yamlDecoder, jsonDecoder runtime.Decoder
}

func newAdmitter(crdYAML []byte) (*admitter, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &def); err != nil {
		return nil, fmt.Errorf("decoding the CRD: %w", err)
	}
	// Default the CRD as the API server does when it is created.
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	scheme.Default(&def)

	if def.Spec.Group != miniClusterKind.Group || def.Spec.Names.Kind != miniClusterKind.Kind {
		return nil, fmt.Errorf("the CRD defines %s.%s, not %s", def.Spec.Names.Kind, def.Spec.Group, miniClusterKind.GroupKind())
	}
	version := miniClusterKind.Version
	var served *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range def.Spec.Versions {
		if v := &def.Spec.Versions[i]; v.Name == version && v.Served {
			served = v
		}
	}
	if served == nil {
		return nil, fmt.Errorf("the CRD does not serve version %s", version)
	}
	if served.Schema == nil || served.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CRD has no schema for version %s", version)
	}

	a := &admitter{
		kind:                  miniClusterKind,
		namespaced:            def.Spec.Scope == apiextensionsv1.NamespaceScoped,
		preserveUnknownFields: def.Spec.PreserveUnknownFields,
		yamlDecoder:           strictSerializer(true),
		jsonDecoder:           strictSerializer(false),
	}

	// The structural schema, as the handler builds it for pruning, defaulting and CEL.
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(served.Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s to the internal version: %w", version, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", version, err)
	}
	if !def.Spec.PreserveUnknownFields {
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("pruning the defaults of %s: %w", version, err)
		}
	}
	a.structural = s
	a.schemas = map[string]*structuralschema.Structural{version: s}

	// The OpenAPI validator, from a fresh conversion as the handler makes one.
	internal = &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(served.Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s to the internal version: %w", version, err)
	}
	if a.validator, _, err = apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema); err != nil {
		return nil, fmt.Errorf("building the schema validator of %s: %w", version, err)
	}

	// customresource.NewStrategy: CEL programs are compiled here, once.
	a.cel = cel.NewValidator(a.structural, true, celconfig.PerCallLimit)

	if sub := served.Subresources; sub != nil {
		if sub.Status != nil {
			a.status = &apiextensionsinternal.CustomResourceSubresourceStatus{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(sub.Status, a.status, nil); err != nil {
				return nil, err
			}
		}
		if sub.Scale != nil {
			a.scale = &apiextensionsinternal.CustomResourceSubresourceScale{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(sub.Scale, a.scale, nil); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// strictSerializer is the StrictSerializer of the handler's unstructuredNegotiatedSerializer.
func strictSerializer(yamlInput bool) runtime.Decoder {
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, unstructuredCreator{},
		crdserverscheme.NewUnstructuredObjectTyper(), kjson.SerializerOptions{Yaml: yamlInput, Strict: true})
}

// unstructuredCreator is the handler's: every kind is created as Unstructured.
type unstructuredCreator struct{}

func (unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// admit admits the manifest and reads the object into the Go type.
func (a *admitter) admit(ctx context.Context, manifest []byte) (*fluxv1alpha2.MiniCluster, error) {
	u, err := a.admitUnstructured(ctx, manifest)
	if err != nil {
		return nil, err
	}
	mc := &fluxv1alpha2.MiniCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, mc, true); err != nil {
		// The schema admitted a field the Go type lacks: the CRD and api/v1alpha2 disagree.
		return nil, fmt.Errorf("converting the admitted MiniCluster to the Go type: %w", err)
	}
	return mc, nil
}

// admitUnstructured runs the server's create path and returns the object as the server would
// store it: the create handler (handlers/create.go: decode, then the request namespace), then
// rest.BeforeCreate (PrepareForCreate, the strategy's Validate, then the generic ObjectMeta
// validation).
func (a *admitter) admitUnstructured(ctx context.Context, manifest []byte) (*unstructured.Unstructured, error) {
	doc, err := singleDocument(manifest)
	if err != nil {
		return nil, err
	}
	u, err := a.decode(doc)
	if err != nil {
		return nil, err
	}

	// handlers/create.go: system fields come from the server, the namespace from the request.
	wipeObjectMetaSystemFields(u)
	if a.namespaced && u.GetNamespace() == "" {
		u.SetNamespace(defaultNamespace)
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		// The server would make a name up; a plan needs the one the user will see.
		return nil, &InvalidError{Kind: u.GetKind(), Errs: field.ErrorList{field.Required(field.NewPath("metadata", "name"),
			"fluxfed needs a name to plan a MiniCluster; generateName is not supported")}}
	}

	// rest.BeforeCreate, which names the object by the kind it claims to be.
	a.prepareForCreate(u)
	if errs := a.validate(ctx, u); len(errs) > 0 {
		return nil, &InvalidError{Kind: u.GetKind(), Name: u.GetName(), Errs: errs}
	}
	if errs := validateObjectMetaPathSegments(u, a.namespaced); len(errs) > 0 {
		return nil, &InvalidError{Kind: u.GetKind(), Name: u.GetName(), Errs: errs}
	}

	// The etcd3 store refuses last, with an error that is no API status: a 500 without a reason.
	if u.GetResourceVersion() != "" {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created",
		}}
	}
	return u, nil
}

// defaultNamespace is where Admit places a MiniCluster whose manifest names no namespace.
const defaultNamespace = "default"

// singleDocument returns the one object of a YAML stream or JSON manifest. A single-document
// manifest is returned as it is, so that the line numbers in decoding errors are the user's.
func singleDocument(manifest []byte) ([]byte, error) {
	docs, err := splitDocuments(manifest)
	if err != nil {
		return nil, &DecodeError{Message: err.Error(), Causes: []string{err.Error()}, Err: err}
	}
	var objects [][]byte
	for _, d := range docs {
		empty, err := isEmptyDocument(d)
		if err != nil || !empty {
			// A document that does not parse is the decoder's to report.
			objects = append(objects, d)
		}
	}
	switch {
	case len(objects) == 0:
		return manifest, nil // the decoder reports what is missing, as the server would
	case len(objects) > 1:
		err := fmt.Errorf("the manifest holds %d objects; a plan takes one MiniCluster", len(objects))
		return nil, &DecodeError{Message: err.Error(), Causes: []string{err.Error()}, Err: err}
	case len(docs) == 1:
		return manifest, nil
	default:
		return objects[0], nil
	}
}
