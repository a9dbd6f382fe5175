package main

import (
	"fmt"
	"math"
	"sort"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// ruleCost is one x-kubernetes-validations rule of a CRD and what the API server estimates it
// costs when the CRD is created or updated.
type ruleCost struct {
	// Path is where the rule sits in the schema of the version, "" for the root: spec.containers[*].
	Path    string
	Rule    string
	Message string
	// MaxCost is the estimated worst-case cost of one evaluation (CompilationResult.MaxCost).
	MaxCost uint64
	// Cardinality is how many times the rule may run on one object: the product of maxItems and
	// maxProperties of the lists and maps above it, unbounded (math.MaxUint64) when one of
	// them has no bound.
	Cardinality uint64
	// Total is MaxCost times Cardinality, what the API server adds to the CRD's total and
	// compares with the limit of one rule.
	Total uint64
}

// crdCosts estimates the cost of every rule of one served version of a CRD, as the API server
// does when it validates the CRD (apiextensions/validation: cel.Compile with the per-call
// limit on each schema node, times the cardinality of the node).
func crdCosts(crdYAML []byte, version string) ([]ruleCost, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crdYAML, &def); err != nil {
		return nil, fmt.Errorf("decoding the CRD: %w", err)
	}
	var v1schema *apiextensionsv1.CustomResourceValidation
	for _, v := range def.Spec.Versions {
		if v.Name == version {
			v1schema = v.Schema
		}
	}
	if v1schema == nil || v1schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CRD %s has no schema for version %q", def.Name, version)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s: %w", version, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", version, err)
	}
	w := &walker{envSet: environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())}
	if err := w.walk(s, model.SchemaDeclType(s, true), "", 1); err != nil {
		return nil, err
	}
	sort.SliceStable(w.costs, func(i, j int) bool { return w.costs[i].Total > w.costs[j].Total })
	return w.costs, nil
}

type walker struct {
	envSet *environment.EnvSet
	costs  []ruleCost
}

// walk compiles the rules of s and goes down into its properties, items and additional
// properties; cardinality is how many times s may occur in one object.
func (w *walker) walk(s *structuralschema.Structural, declType *apiservercel.DeclType, path string, cardinality uint64) error {
	if s == nil || declType == nil {
		return nil
	}
	if len(s.XValidations) > 0 {
		results, err := cel.Compile(s, declType, celconfig.PerCallLimit, w.envSet, cel.NewExpressionsEnvLoader())
		if err != nil {
			return fmt.Errorf("compiling the rules at %s: %w", displayPath(path), err)
		}
		for i, r := range results {
			if r.Error != nil {
				return fmt.Errorf("compiling rule %d at %s: %s", i, displayPath(path), r.Error.Detail)
			}
			c := cardinality
			if c == math.MaxUint64 {
				// Under an unbounded list or map the API server takes the estimator's own
				// cardinality (getExpressionCost).
				c = r.MaxCardinality
			}
			w.costs = append(w.costs, ruleCost{
				Path: path, Rule: s.XValidations[i].Rule, Message: s.XValidations[i].Message,
				MaxCost: r.MaxCost, Cardinality: c, Total: multiply(r.MaxCost, c),
			})
		}
	}
	// The factor by which s multiplies the occurrences of what is under it (extractMaxElements).
	factor := uint64(1)
	switch {
	case s.Type == "array":
		factor = bound(s.ValueValidation, true)
	case s.Type == "object" && s.AdditionalProperties != nil:
		factor = bound(s.ValueValidation, false)
	}
	child := multiply(cardinality, factor)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		escaped, ok := apiservercel.Escape(name)
		if !ok {
			continue
		}
		field, ok := declType.Fields[escaped]
		if !ok {
			continue
		}
		prop := s.Properties[name]
		if err := w.walk(&prop, field.Type, join(path, name), child); err != nil {
			return err
		}
	}
	if s.Items != nil {
		if err := w.walk(s.Items, declType.ElemType, path+"[*]", child); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		if err := w.walk(s.AdditionalProperties.Structural, declType.ElemType, path+"[*]", child); err != nil {
			return err
		}
	}
	return nil
}

// bound is maxItems (list) or maxProperties (map), unbounded when unset.
func bound(v *structuralschema.ValueValidation, list bool) uint64 {
	if v == nil {
		return math.MaxUint64
	}
	m := v.MaxProperties
	if list {
		m = v.MaxItems
	}
	if m == nil {
		return math.MaxUint64
	}
	return uint64(max(*m, 0))
}

// multiply is the API server's multiplyWithOverflowGuard.
func multiply(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func displayPath(path string) string {
	if path == "" {
		return "<root>"
	}
	return path
}
