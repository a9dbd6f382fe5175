package admit

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// The functions in this file follow k8s.io/apiextensions-apiserver/pkg/registry/customresource
// (strategy.go, validator.go) and k8s.io/apiserver/pkg/registry/rest/create.go at v0.36.3, whose
// pieces are unexported there; each names the function it mirrors.

// prepareForCreate is customResourceStrategy.PrepareForCreate: with a status subresource a create
// cannot set status; the first generation is 1.
func (a *admitter) prepareForCreate(u *unstructured.Unstructured) {
	if a.status != nil {
		delete(u.Object, "status")
	}
	u.SetGeneration(1)
}

// validate is customResourceStrategy.Validate.
func (a *admitter) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, a.validateObject(u)...)

	// Embedded resources (x-kubernetes-embedded-resource).
	errs = append(errs, schemaobjectmeta.Validate(nil, u.Object, a.structural, false)...)

	// The x-kubernetes-list-type map and set invariants.
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, a.structural, u.Object)...)

	// The x-kubernetes-validations rules, unless the object is too broken for them.
	if a.cel != nil {
		if blocked, err := hasBlockingErr(errs); blocked {
			errs = append(errs, err)
		} else {
			celErrs, _ := a.cel.Validate(ctx, nil, a.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, sortedByField(celErrs)...)
		}
	}
	return errs
}

// validateObject is customResourceValidator.Validate.
func (a *admitter) validateObject(u *unstructured.Unstructured) field.ErrorList {
	if errs := a.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaAccessor(u, a.namespaced, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, sortedByField(apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), a.validator))...)
	errs = append(errs, a.validateScaleSpec(u)...)
	errs = append(errs, a.validateScaleStatus(u)...)
	return errs
}

// sortedByField orders the errors of one validator by field path. The OpenAPI and CEL validators
// walk the object's maps, so the server lists their errors in Go's random map order; a plan should
// print the same refusal every time. Sorting keeps the order of the validators themselves.
func sortedByField(errs field.ErrorList) field.ErrorList {
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.ErrorBody(), b.ErrorBody()))
	})
	return errs
}

// validateTypeMeta is customResourceValidator.ValidateTypeMeta.
func (a *admitter) validateTypeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if kind := u.GetKind(); kind != a.kind.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, fmt.Sprintf("must be %v", a.kind.Kind)))
	}
	if apiVersion := u.GetAPIVersion(); apiVersion != a.kind.Group+"/"+a.kind.Version {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, fmt.Sprintf("must be %v", a.kind.Group+"/"+a.kind.Version)))
	}
	return errs
}

// validateScaleSpec is customResourceValidator.ValidateScaleSpec.
func (a *admitter) validateScaleSpec(u *unstructured.Unstructured) field.ErrorList {
	if a.scale == nil {
		return nil
	}
	var errs field.ErrorList
	path := strings.TrimPrefix(a.scale.SpecReplicasPath, ".")
	replicas, _, err := unstructured.NestedInt64(u.UnstructuredContent(), strings.Split(path, ".")...)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.SpecReplicasPath), replicas, err.Error()))
	case replicas < 0:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.SpecReplicasPath), replicas, "should be a non-negative integer"))
	case replicas > math.MaxInt32:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.SpecReplicasPath), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
	}
	return errs
}

// validateScaleStatus is customResourceValidator.ValidateScaleStatus.
func (a *admitter) validateScaleStatus(u *unstructured.Unstructured) field.ErrorList {
	if a.scale == nil {
		return nil
	}
	var errs field.ErrorList
	path := strings.TrimPrefix(a.scale.StatusReplicasPath, ".")
	replicas, _, err := unstructured.NestedInt64(u.UnstructuredContent(), strings.Split(path, ".")...)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.StatusReplicasPath), replicas, err.Error()))
	case replicas < 0:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.StatusReplicasPath), replicas, "should be a non-negative integer"))
	case replicas > math.MaxInt32:
		errs = append(errs, field.Invalid(field.NewPath(a.scale.StatusReplicasPath), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
	}
	if a.scale.LabelSelectorPath != nil {
		path := strings.TrimPrefix(*a.scale.LabelSelectorPath, ".")
		selector, _, err := unstructured.NestedString(u.UnstructuredContent(), strings.Split(path, ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*a.scale.LabelSelectorPath), selector, err.Error()))
		}
	}
	return errs
}

// hasBlockingErr is the strategy's: OpenAPI type, maxLength, maxItems, maxProperties, required
// and enum violations leave the object too broken for CEL rules to run on.
func hasBlockingErr(errs field.ErrorList) (bool, *field.Error) {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return false, nil
}

// validateObjectMetaPathSegments is the generic ObjectMeta validation that rest.BeforeCreate runs
// after the strategy's: names must be usable as URL path segments.
func validateObjectMetaPathSegments(u *unstructured.Unstructured, namespaced bool) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMetaAccessor(u, namespaced, validatePathSegment, field.NewPath("metadata"))
}

// validatePathSegment is rest.validatePathSegment.
func validatePathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}
