package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// The rules of the current CRD were rewritten from those of the baseline to cost the API
// server less; these tests check that each rewritten rule decides as its baseline did: the
// string rules over every string of up to four characters from an alphabet of the characters
// that matter to them (and FuzzStringRules beyond), the object rules over MiniClusters that
// vary what they read.

// evaluator runs the rules of one CRD variant, compiled once per place in the schema.
type evaluator struct {
	s        *structuralschema.Structural
	envSet   *environment.EnvSet
	compiled map[string][]cel.CompilationResult
}

func newEvaluator(tb testing.TB, crd []byte) *evaluator {
	tb.Helper()
	return &evaluator{
		s:        structural(tb, crd),
		envSet:   environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()),
		compiled: map[string][]cel.CompilationResult{},
	}
}

func (e *evaluator) compile(tb testing.TB, s *structuralschema.Structural, declType *apiservercel.DeclType, pattern string) []cel.CompilationResult {
	tb.Helper()
	if r, ok := e.compiled[pattern]; ok {
		return r
	}
	results, err := cel.Compile(s, declType, celconfig.PerCallLimit, e.envSet, cel.StoredExpressionsEnvLoader())
	if err != nil {
		tb.Fatal(err)
	}
	for i, r := range results {
		if r.Error != nil {
			tb.Fatalf("%s rule %d: %s", displayPath(pattern), i, r.Error.Detail)
		}
	}
	e.compiled[pattern] = results
	return results
}

// outcomes evaluates every rule that runs on a create of obj (defaulted first, as the API server
// does) and returns what each decided, by the place it ran at (list indexes and map keys
// filled in) and its message.
func (e *evaluator) outcomes(tb testing.TB, obj map[string]any) map[string]string {
	tb.Helper()
	structuraldefaulting.Default(obj, e.s)
	out := map[string]string{}
	var walk func(s *structuralschema.Structural, declType *apiservercel.DeclType, value any, path, pattern string, root bool)
	walk = func(s *structuralschema.Structural, declType *apiservercel.DeclType, value any, path, pattern string, root bool) {
		if s == nil || declType == nil || value == nil {
			return
		}
		if len(s.XValidations) > 0 {
			results := e.compile(tb, s, declType, pattern)
			sts := s
			if root {
				sts = model.WithTypeAndObjectMeta(s)
			}
			self := cel.UnstructuredToVal(value, sts)
			for i, r := range results {
				if r.UsesOldSelf {
					continue
				}
				out[displayPath(path)+" "+s.XValidations[i].Message] = eval(r, self)
			}
		}
		switch v := value.(type) {
		case map[string]any:
			if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
				for k, item := range v {
					walk(s.AdditionalProperties.Structural, declType.ElemType, item, path+"["+k+"]", pattern+"[*]", false)
				}
				return
			}
			for name, prop := range s.Properties {
				escaped, ok := apiservercel.Escape(name)
				if !ok {
					continue
				}
				if field, ok := declType.Fields[escaped]; ok {
					walk(&prop, field.Type, v[name], join(path, name), join(pattern, name), false)
				}
			}
		case []any:
			for i, item := range v {
				walk(s.Items, declType.ElemType, item, fmt.Sprintf("%s[%d]", path, i), pattern+"[*]", false)
			}
		}
	}
	walk(e.s, model.SchemaDeclType(e.s, true), obj, "", "", true)
	return out
}

// eval runs a compiled rule on self and says what it decided: true, false or its error.
func eval(r cel.CompilationResult, self any) string {
	v, _, err := r.Program.ContextEval(context.Background(), map[string]any{"self": self})
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(v)
}

// stringRules returns the rules of the string fields whose rules were rewritten, compiled, by
// place and message.
func (e *evaluator) stringRules(tb testing.TB) map[string]cel.CompilationResult {
	tb.Helper()
	out := map[string]cel.CompilationResult{}
	for _, pattern := range stringRulePaths {
		s, declType := e.s, model.SchemaDeclType(e.s, true)
		for part := range strings.SplitSeq(pattern, ".") {
			name, list := strings.CutSuffix(part, "[*]")
			prop := s.Properties[name]
			s, declType = &prop, declType.Fields[name].Type
			if list {
				s, declType = s.Items, declType.ElemType
			}
		}
		for i, r := range e.compile(tb, s, declType, pattern) {
			out[pattern+" "+s.XValidations[i].Message] = r
		}
	}
	return out
}

// stringRulePaths are the string fields with rules of their own.
var stringRulePaths = []string{
	"spec.flux.container.mountPath",
	"spec.flux.container.workingDir",
	"spec.flux.container.pythonPath",
	"spec.archive.path",
	"spec.containers[*].workingDir",
	"spec.containers[*].logs",
	"spec.services[*].workingDir",
	"spec.services[*].logs",
}

func baselineAndCurrent(tb testing.TB) (*evaluator, *evaluator) {
	tb.Helper()
	v := variants(tb)
	return newEvaluator(tb, v[0].crd), newEvaluator(tb, v[1].crd)
}

// pathAlphabet holds a character of each class the path rules tell apart: the separators, dot,
// comma, a letter, a space, a no-break space (Zs), a control character (Cc), a bidirectional
// override (Cf), a line separator (Zl) and a letter beyond ASCII.
var pathAlphabet = []string{"/", ".", ":", ",", "a", " ", "\u00a0", "\n", "\u202e", "\u2028", "é"}

// allStrings returns every string of at most n symbols of alphabet.
func allStrings(alphabet []string, n int) []string {
	out, last := []string{""}, []string{""}
	for range n {
		var next []string
		for _, p := range last {
			for _, c := range alphabet {
				next = append(next, p+c)
			}
		}
		out, last = append(out, next...), next
	}
	return out
}

func compareStringRules(t *testing.T, before, now map[string]cel.CompilationResult, values []string) {
	t.Helper()
	if len(before) != len(now) || len(now) == 0 {
		t.Fatalf("the baseline has %d string rules at %v, the current CRD %d", len(before), stringRulePaths, len(now))
	}
	for key, old := range before {
		cur, ok := now[key]
		if !ok {
			t.Fatalf("the current CRD has no rule %q", key)
		}
		for _, v := range values {
			if a, b := eval(old, types.String(v)), eval(cur, types.String(v)); a != b {
				t.Errorf("%s\non %q: the baseline decides %s, the current rule %s", key, v, a, b)
			}
		}
	}
}

func TestStringRulesDecideAsBefore(t *testing.T) {
	base, cur := baselineAndCurrent(t)
	values := allStrings(pathAlphabet, 4)
	values = append(values, "/", "//", "/..", "/../", "/a/..", "/a/../b", "/...", "/..a", "/.a", "/.", "/a:/b", "/a:b", "/a:", ":/a", "/a::/b", "/a:/..", "/a:/../b", "/a/..:/b")
	compareStringRules(t, base.stringRules(t), cur.stringRules(t), values)
}

func FuzzStringRules(f *testing.F) {
	for _, seed := range []string{"/mnt/flux", "/a/../b", "/a:/b/..", "/x\u2028y", "/a b,c", "/.../..a/."} {
		f.Add(seed)
	}
	base, cur := baselineAndCurrent(f)
	before, now := base.stringRules(f), cur.stringRules(f)
	f.Fuzz(func(t *testing.T, s string) {
		compareStringRules(t, before, now, []string{s})
	})
}

// objectCorpus returns MiniClusters that vary what the rewritten object rules read: names,
// sizes, bursts, containers and volume names.
func objectCorpus(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	add := func(name, spec string) {
		// Numbers are decoded as the API server decodes them: integers as int64.
		var m map[string]any
		data, err := yaml.YAMLToJSON([]byte(spec))
		if err == nil {
			err = utiljson.Unmarshal(data, &m)
		}
		if err != nil {
			tb.Fatalf("%s: %v", spec, err)
		}
		out = append(out, map[string]any{
			"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": m,
		})
	}
	// Names and sizes.
	for _, name := range allStrings([]string{"a", "0", "-", ".", "A", "_"}, 4) {
		add(name, v1alpha2test.OneContainer)
	}
	long := strings.Repeat("a", 58)
	for _, name := range []string{long, long + "b", long + "bc", long + "bcd", long + "bcde", long + "-", "-" + long} {
		for _, size := range []string{"size: 1", "size: 2", "size: 10", "size: 11", "size: 100", "size: 101"} {
			for _, maxSize := range []string{"", "maxSize: 0", "maxSize: 1", "maxSize: 10", "maxSize: 11", "maxSize: 1000"} {
				add(name, size+"\n"+maxSize+"\n"+v1alpha2test.OneContainer)
			}
		}
	}
	// Bursts, named like the MiniCluster or not, with or without a lead broker.
	for _, bursting := range []string{"", "flux: {}", "flux: {bursting: {}}", "flux: {bursting: {clusters: []}}",
		"flux: {bursting: {clusters: [{name: root, size: 1}]}}",
		"flux: {bursting: {clusters: [{name: other, size: 1}, {name: root, size: 1}]}}",
		"flux: {bursting: {clusters: [{name: other, size: 1}]}}",
		"flux: {bursting: {leadBroker: {name: lead, address: a, size: 2}}}",
		"flux: {bursting: {leadBroker: {name: lead, address: a, size: 2}, clusters: [{name: root, size: 1}]}}",
		"flux: {bursting: {leadBroker: {name: lead, address: a, size: 2}, clusters: [{name: other, size: 1}]}}",
	} {
		add("root", v1alpha2test.OneContainer+bursting+"\n")
	}
	// Containers: names, runFlux, command and script, oversubscribe; every single container,
	// and pairs and triples drawn at random.
	var containers []string
	for _, name := range []string{"", "name: x", "name: z"} {
		for _, runFlux := range []string{"", "runFlux: false", "runFlux: true"} {
			for _, command := range []string{"", "command: ''", "command: c"} {
				for _, commands := range []string{"", "commands: {}", "commands: {script: ''}", "commands: {script: s}"} {
					fields := []string{"image: i"}
					for _, f := range []string{name, runFlux, command, commands} {
						if f != "" {
							fields = append(fields, f)
						}
					}
					containers = append(containers, "{"+strings.Join(fields, ", ")+"}")
				}
			}
		}
	}
	oversubscribe := []string{"", "oversubscribe: false\n", "oversubscribe: true\n"}
	for _, c := range containers {
		for _, o := range oversubscribe {
			add("one", o+"containers: ["+c+"]\n")
		}
	}
	rng := rand.New(rand.NewPCG(25, 4))
	for range 1000 {
		n := 2 + rng.IntN(2)
		picked := make([]string, n)
		for i := range picked {
			picked[i] = containers[rng.IntN(len(containers))]
		}
		add("many", oversubscribe[rng.IntN(3)]+"containers: ["+strings.Join(picked, ", ")+"]\n")
	}
	// Volume names, as keys of volumes and existingVolumes.
	for _, name := range allStrings([]string{"a", "0", "-", ".", "A"}, 4) {
		add("volumes", fmt.Sprintf("containers:\n- image: i\n  volumes: {%q: {path: /data}}\n  existingVolumes: {%q: {path: /x}}\nvolumes: {%q: {emptyDir: {}}}\n", name, name, name))
	}
	add("volumes", "containers:\n- image: i\n  volumes: {"+strings.Repeat("a", 63)+": {path: /data}, "+strings.Repeat("b", 64)+": {path: /data}}\n")
	// The specs the API's own tests refuse and the hostile ones.
	for _, c := range v1alpha2test.InvalidCases() {
		add(c.ObjectName(), c.Spec)
	}
	for _, c := range v1alpha2test.HostileSpecs() {
		add(c.ObjectName(), c.Spec)
	}
	return out
}

func TestObjectRulesDecideAsBefore(t *testing.T) {
	base, cur := baselineAndCurrent(t)
	corpus := objectCorpus(t)
	var compared int
	for _, obj := range corpus {
		before := base.outcomes(t, runtime.DeepCopyJSON(obj))
		now := cur.outcomes(t, runtime.DeepCopyJSON(obj))
		for key, a := range before {
			b, ok := now[key]
			if !ok {
				t.Fatalf("the current CRD runs no rule %q on %v", key, obj)
			}
			if a != b {
				t.Errorf("%s\non %v: the baseline decides %s, the current rule %s", key, obj, a, b)
			}
			compared++
		}
		if len(now) != len(before) {
			t.Fatalf("the current CRD runs %d rules on %v, the baseline %d", len(now), obj, len(before))
		}
	}
	t.Logf("%d MiniClusters, %d rule outcomes compared", len(corpus), compared)
}
