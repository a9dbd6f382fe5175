package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// variant is a MiniCluster CRD the benchmarks compare: the baseline, the rules as they were
// before their cheaper rewrite (testdata/miniclusters-baseline.yaml), and the current one
// (deploy/crd).
type variant struct {
	name string
	crd  []byte
}

func variants(tb testing.TB) []variant {
	tb.Helper()
	var out []variant
	for _, v := range []struct{ name, path string }{
		{"baseline", filepath.Join(testenv.RepoRoot(), "tools", "celcost", "testdata", "miniclusters-baseline.yaml")},
		{"current", filepath.Join(testenv.RepoRoot(), "deploy", "crd", "flux-framework.org_miniclusters.yaml")},
	} {
		data, err := os.ReadFile(v.path)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, variant{v.name, data})
	}
	return out
}

// structural returns the structural schema of the CRD's v1alpha2, as the API server's handler
// builds it.
func structural(tb testing.TB, crdYAML []byte) *structuralschema.Structural {
	tb.Helper()
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crdYAML, &def); err != nil {
		tb.Fatal(err)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(def.Spec.Versions[0].Schema, internal, nil); err != nil {
		tb.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fluxOperatorShape returns the MiniCluster the Flux Operator's users usually create (one
// container, size 4) as the API server validates it: unstructured, with the defaults of s.
func fluxOperatorShape(tb testing.TB, s *structuralschema.Structural) map[string]any {
	tb.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v1alpha2test.MiniCluster("mc-001").Size(4).Obj())
	if err != nil {
		tb.Fatal(err)
	}
	structuraldefaulting.Default(obj, s)
	return obj
}

// BenchmarkCELValidation runs the CEL rules of each CRD variant over a defaulted MiniCluster
// of the Flux Operator's usual shape (one container, size 4), as the API server does on a
// create (customResourceStrategy.Validate): the CEL part of the server's time per create,
// without the server's other work and noise.
func BenchmarkCELValidation(b *testing.B) {
	for _, v := range variants(b) {
		s := structural(b, v.crd)
		validator := cel.NewValidator(s, true, celconfig.PerCallLimit)
		obj := fluxOperatorShape(b, s)
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				errs, _ := validator.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
				if len(errs) > 0 {
					b.Fatal(fmt.Sprint(errs))
				}
			}
		})
	}
}

// liveRule is one rule, compiled, and a value of the object it runs on.
type liveRule struct {
	path  string
	index int
	rule  string
	prog  celgo.Program
	self  any
}

// liveRules returns the rules of s that run on a create of obj (transition rules do not), each
// with the value it runs on: every item of a list and every value of a map under it.
func liveRules(tb testing.TB, s *structuralschema.Structural, obj any) []liveRule {
	tb.Helper()
	envSet := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	var out []liveRule
	var walk func(s *structuralschema.Structural, declType *apiservercel.DeclType, value any, path string, root bool)
	walk = func(s *structuralschema.Structural, declType *apiservercel.DeclType, value any, path string, root bool) {
		if s == nil || declType == nil || value == nil {
			return
		}
		if len(s.XValidations) > 0 {
			results, err := cel.Compile(s, declType, celconfig.PerCallLimit, envSet, cel.StoredExpressionsEnvLoader())
			if err != nil {
				tb.Fatal(err)
			}
			sts := s
			if root {
				sts = model.WithTypeAndObjectMeta(s)
			}
			self := cel.UnstructuredToVal(value, sts)
			for i, r := range results {
				if r.Error != nil {
					tb.Fatalf("%s: %s", displayPath(path), r.Error.Detail)
				}
				if !r.UsesOldSelf {
					out = append(out, liveRule{path: displayPath(path), index: i, rule: s.XValidations[i].Rule, prog: r.Program, self: self})
				}
			}
		}
		switch v := value.(type) {
		case map[string]any:
			if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
				for k, item := range v {
					walk(s.AdditionalProperties.Structural, declType.ElemType, item, path+"["+k+"]", false)
				}
				return
			}
			for name, prop := range s.Properties {
				escaped, ok := apiservercel.Escape(name)
				if !ok {
					continue
				}
				if field, ok := declType.Fields[escaped]; ok {
					walk(&prop, field.Type, v[name], join(path, name), false)
				}
			}
		case []any:
			for i, item := range v {
				walk(s.Items, declType.ElemType, item, fmt.Sprintf("%s[%d]", path, i), false)
			}
		}
	}
	walk(s, model.SchemaDeclType(s, true), obj, "", true)
	sort.Slice(out, func(i, j int) bool {
		if out[i].path != out[j].path {
			return out[i].path < out[j].path
		}
		return out[i].index < out[j].index
	})
	return out
}

// BenchmarkCELRules times each rule of each variant that runs on a create of the Flux
// Operator's usual MiniCluster, alone: where the CEL time of a create goes.
func BenchmarkCELRules(b *testing.B) {
	for _, v := range variants(b) {
		s := structural(b, v.crd)
		obj := fluxOperatorShape(b, s)
		for _, r := range liveRules(b, s, obj) {
			b.Run(fmt.Sprintf("%s/%s#%d", v.name, r.path, r.index), func(b *testing.B) {
				ctx := context.Background()
				activation := map[string]any{"self": r.self}
				for b.Loop() {
					out, _, err := r.prog.ContextEval(ctx, activation)
					if err != nil || out != types.True {
						b.Fatalf("%s: %v %v", r.rule, out, err)
					}
				}
			})
		}
	}
}
