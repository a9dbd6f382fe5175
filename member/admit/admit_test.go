package admit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/admit"
)

// The tables below are run twice: offline, where Admit must refuse each invalid manifest with the
// named cause, and against a real kube-apiserver with the CRD installed, where every cause the
// server gives must be one Admit gives, and every valid manifest must be stored with the spec that
// Admit returns.

// manifest is a MiniCluster manifest with the given name and the YAML of its spec.
func manifest(name, spec string) string {
	return "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: " + name +
		"\nspec:\n  " + strings.ReplaceAll(strings.TrimSuffix(spec, "\n"), "\n", "\n  ") + "\n"
}

type invalidCase struct {
	name     string
	manifest string
	// field and message name one cause Admit must give: the field path, and part of the message.
	// For a refusal before validation (Bad Request), field is empty and message is part of it.
	field   string
	message string
}

func (c invalidCase) body() []byte { return []byte(c.manifest) }

// invalidCases are the invalid specs the API server refuses (v1alpha2test's), and manifests it
// refuses for their metadata or before validation.
func invalidCases() []invalidCase {
	var cases []invalidCase
	for _, c := range v1alpha2test.InvalidCases() {
		cases = append(cases, invalidCase{name: c.Name, manifest: manifest(c.ObjectName(), c.Spec), field: c.Field, message: c.Message})
	}
	return append(cases, []invalidCase{
		// Metadata.
		{name: "no name", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nspec:\n  " + strings.ReplaceAll(v1alpha2test.OneContainer, "\n", "\n  "), field: "metadata.name", message: "Required value: name or generateName is required"},
		{name: "invalid label", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: invalid-label\n  labels: {'a b': c}\nspec:\n  containers: [{image: a}]\n", field: "metadata.labels", message: "name part must consist of alphanumeric characters"},
		{name: "no spec", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: no-spec}\n", field: "spec", message: "Required value"},
		{name: "wrong kind", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniClusterSet\nmetadata: {name: wrong-kind}\nspec: {containers: [{image: a}]}\n", field: "kind", message: "must be MiniCluster"},

		// Refused before validation: strict field validation and decoding.
		{name: "unknown spec field", manifest: manifest("unknown-spec-field", "sizee: 2\n"+v1alpha2test.OneContainer), message: `strict decoding error: unknown field "spec.sizee"`},
		{name: "v1alpha1 lead broker", manifest: manifest("v1alpha1-lead-broker", v1alpha2test.OneContainer+"flux:\n  leadBroker: {name: a, address: b}\n"), message: `unknown field "spec.flux.leadBroker"`},
		{name: "unknown container fields", manifest: manifest("unknown-container-fields", "containers:\n- {image: a, imagee: b, env: {A: b}}\n"), message: `unknown field "spec.containers[0].env", unknown field "spec.containers[0].imagee"`},
		{name: "unknown metadata field", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: unknown-metadata-field, label: {a: b}}\nspec: {containers: [{image: a}]}\n", message: `unknown field "metadata.label"`},
		{name: "unknown top-level field", manifest: manifest("unknown-top-level-field", v1alpha2test.OneContainer) + "specs: {}\n", message: `unknown field "specs"`},
		{name: "duplicate YAML field", manifest: manifest("duplicate-yaml-field", "size: 2\nsize: 3\n"+v1alpha2test.OneContainer), message: `key "size" already set in map`},
		{name: "duplicate JSON field", manifest: `{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "metadata": {"name": "duplicate-json-field"}, "spec": {"size": 2, "size": 3, "containers": [{"image": "a"}]}}`, message: `duplicate field "spec.size"`},
		{name: "unknown JSON field", manifest: `{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "metadata": {"name": "unknown-json-field"}, "spec": {"containers": [{"image": "a", "cmd": "x"}]}}`, message: `unknown field "spec.containers[0].cmd"`},
		{name: "malformed labels", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: malformed-labels, labels: 3}\nspec: {containers: [{image: a}]}\n", message: "cannot unmarshal number"},
		{name: "older apiVersion", manifest: "apiVersion: flux-framework.org/v1alpha1\nkind: MiniCluster\nmetadata: {name: older-api-version}\nspec: {containers: [{image: a}]}\n", message: `MiniCluster in version "v1alpha1" cannot be handled as a MiniCluster: strict decoding error: unknown field "spec"`},
		{name: "no apiVersion", manifest: "kind: MiniCluster\nmetadata: {name: no-api-version}\nspec: {containers: [{image: a}]}\n", message: "the API version in the data () does not match the expected API version (flux-framework.org/v1alpha2)"},
		{name: "no kind", manifest: "apiVersion: flux-framework.org/v1alpha2\nmetadata: {name: no-kind}\nspec: {containers: [{image: a}]}\n", message: "Object 'Kind' is missing"},
		{name: "resourceVersion set", manifest: strings.Replace(manifest("resource-version-set", v1alpha2test.OneContainer), "name: resource-version-set", "name: resource-version-set\n  resourceVersion: '5'", 1), message: "resourceVersion should not be set on objects to be created"},
		{name: "not an object", manifest: "- apiVersion: flux-framework.org/v1alpha2\n", message: "cannot unmarshal array"},
	}...)
}

// validManifests are the examples and a few manifests that exercise defaulting.
func validManifests(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no examples found")
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = data
	}
	hello, err := utilyaml.ToJSON(out["hello-world.yaml"])
	require.NoError(t, err)
	out["hello-world.json"] = []byte(strings.Replace(string(hello), `"hello-world"`, `"hello-world-json"`, 1))

	out["nulls are defaulted"] = []byte(manifest("nulls-are-defaulted", "size: null\ntasks: null\nflux: {logLevel: null, scheduler: null}\n"+v1alpha2test.OneContainer))
	out["status is dropped"] = []byte(manifest("status-is-dropped", "size: 3\n"+v1alpha2test.OneContainer) + "status: {size: 3, ready: 3}\n")
	out["lead broker port"] = []byte(manifest("lead-broker-port", v1alpha2test.OneContainer+"flux:\n  bursting:\n    leadBroker: {name: root, address: 127.0.2.10, size: 2}\n"))
	out["quantities as numbers"] = []byte(manifest("quantities-as-numbers", "containers:\n- image: a\n  resources: {limits: {cpu: 2, memory: 1Gi}}\n"))
	out["comment document first"] = []byte("# nothing here\n---\n" + manifest("comment-document-first", v1alpha2test.OneContainer))
	return out
}

// TestAdmitRefusesInvalidManifests needs no API server: each manifest must be refused with the
// cause the case names.
func TestAdmitRefusesInvalidManifests(t *testing.T) {
	for _, tt := range invalidCases() {
		t.Run(tt.name, func(t *testing.T) {
			mc, err := admit.Admit(tt.body())
			require.Error(t, err, "Admit accepted an invalid MiniCluster: %+v", mc)
			if tt.field == "" {
				require.Contains(t, err.Error(), tt.message)
				var decodeErr *admit.DecodeError
				if errors.As(err, &decodeErr) {
					require.True(t, apierrors.IsBadRequest(err))
					require.NotEmpty(t, decodeErr.Causes)
					return
				}
				require.Equal(t, http.StatusInternalServerError, int(statusOf(t, err).Code), "neither a DecodeError nor the storage layer's 500: %v", err)
				return
			}
			var invalid *admit.InvalidError
			require.ErrorAs(t, err, &invalid)
			require.True(t, apierrors.IsInvalid(err))
			want := tt.field + ": "
			for _, c := range invalid.Errs {
				if strings.HasPrefix(c.Error(), want) && strings.Contains(c.Error(), tt.message) {
					return
				}
			}
			t.Fatalf("no cause at %s saying %q; Admit said:\n%s", tt.field, tt.message, err)
		})
	}
}

// TestAdmitMatchesAPIServer sends every manifest, as it is, to a real API server (a POST with
// fieldValidation=Strict and the manifest's media type, as kubectl create does) and compares
// the outcome with Admit's.
func TestAdmitMatchesAPIServer(t *testing.T) {
	env := testenv.Start(t)
	server := newServer(t, env)

	t.Run("invalid", func(t *testing.T) {
		cases := invalidCases()
		require.GreaterOrEqual(t, len(cases), 25)
		for _, tt := range cases {
			t.Run(tt.name, func(t *testing.T) {
				body := tt.body()
				_, serverErr := server.create(t, body)
				require.Error(t, serverErr, "the API server accepted the manifest")
				want := statusOf(t, serverErr)

				mc, err := admit.Admit(body)
				require.Error(t, err, "Admit accepted what the API server refused with %v: %+v", serverErr, mc)
				got := statusOf(t, err)

				require.Equal(t, want.Reason, got.Reason, "server: %v\nAdmit:  %v", serverErr, err)
				require.Equal(t, want.Code, got.Code)
				if want.Reason != metav1.StatusReasonInvalid {
					require.Equal(t, want.Message, got.Message)
					return
				}
				require.Equal(t, want.Details.Name, got.Details.Name)
				require.Equal(t, want.Details.Group, got.Details.Group)
				require.Equal(t, want.Details.Kind, got.Details.Kind)
				wantCauses, gotCauses := causes(want), causes(got)
				for _, c := range wantCauses {
					require.Contains(t, gotCauses, c, "Admit misses a cause the API server gives; Admit said:\n%s", strings.Join(gotCauses, "\n"))
				}
				// Admit adds nothing of its own either.
				require.ElementsMatch(t, wantCauses, gotCauses)
				if len(wantCauses) == 1 {
					// With one cause, the order of the causes cannot make the messages differ.
					require.Equal(t, want.Message, got.Message)
				}
			})
		}
	})

	t.Run("valid", func(t *testing.T) {
		for name, body := range validManifests(t) {
			t.Run(name, func(t *testing.T) {
				mc, err := admit.Admit(body)
				require.NoError(t, err)

				created, err := server.create(t, body)
				require.NoError(t, err, "the API server refused what Admit accepted")
				stored := &unstructured.Unstructured{}
				stored.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
				require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(created), stored))

				require.Equal(t, stored.GetName(), mc.Name)
				require.Equal(t, stored.GetNamespace(), mc.Namespace)
				require.Equal(t, stored.GetGeneration(), mc.Generation)
				require.Equal(t, stored.GetLabels(), nilIfEmpty(mc.Labels))
				require.Equal(t, stored.GetAnnotations(), nilIfEmpty(mc.Annotations))
				_, hasStatus := stored.Object["status"]
				require.False(t, hasStatus, "a create cannot set status")
				require.Zero(t, mc.Status, "a create cannot set status")

				// The spec as the server stores it, and as the Go type reads it back, against
				// the spec Admit returns.
				var typed fluxv1alpha2.MiniCluster
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &typed))
				if diff := cmp.Diff(jsonValue(t, typed.Spec), jsonValue(t, mc.Spec)); diff != "" {
					t.Errorf("spec (-stored +Admit):\n%s", diff)
				}
				// And field for field, before the Go type drops the defaults that are zero values.
				u, err := admit.AdmitUnstructured(body)
				require.NoError(t, err)
				if diff := cmp.Diff(jsonValue(t, stored.Object["spec"]), jsonValue(t, u.Object["spec"])); diff != "" {
					t.Errorf("spec as stored (-stored +Admit):\n%s", diff)
				}
			})
		}
	})
}

// TestAdmitDefaults checks the defaulted object Admit returns, without a server.
func TestAdmitDefaults(t *testing.T) {
	mc, err := admit.Admit([]byte(manifest("minimal", "containers: [{image: rockylinux:9}]\n")))
	require.NoError(t, err)
	require.Equal(t, "minimal", mc.Name)
	require.Equal(t, "default", mc.Namespace)
	require.Equal(t, int64(1), mc.Generation)
	require.Equal(t, int32(1), mc.Spec.Size)
	require.Empty(t, mc.Spec.Network.HeadlessName, "no default: the Service is named after the MiniCluster")
	require.Equal(t, "minimal", mc.HeadlessName())
	require.Equal(t, "/mnt/flux", mc.Spec.Flux.Container.MountPath)
	require.Equal(t, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"), mc.GroupVersionKind())

	mc, err = admit.Admit([]byte(strings.Replace(manifest("elsewhere", v1alpha2test.OneContainer), "name: elsewhere", "name: elsewhere\n  namespace: team-a", 1)))
	require.NoError(t, err)
	require.Equal(t, "team-a", mc.Namespace)
}

func TestAdmitRefusesWhatItCannotPlan(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		message  string
	}{
		{name: "generateName", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {generateName: mc-}\nspec: {containers: [{image: a}]}\n", message: "generateName is not supported"},
		{name: "two objects", manifest: manifest("a", v1alpha2test.OneContainer) + "---\n" + manifest("b", v1alpha2test.OneContainer), message: "the manifest holds 2 objects"},
		{name: "comments only", manifest: "# nothing\n", message: "Object 'Kind' is missing"},
		{name: "empty", manifest: "", message: "Object 'Kind' is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := admit.Admit([]byte(tt.manifest))
			require.ErrorContains(t, err, tt.message)
		})
	}
}

func TestAdmitErrorsListCauses(t *testing.T) {
	_, err := admit.Admit([]byte(manifest("causes", "size: 0\ntasks: -1\n"+v1alpha2test.OneContainer)))
	var invalid *admit.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "causes", invalid.Name)
	require.Equal(t, `MiniCluster.flux-framework.org "causes" is invalid: [`+
		`spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1, `+
		`spec.tasks: Invalid value: -1: spec.tasks in body should be greater than or equal to 0]`, err.Error())
	require.Len(t, invalid.Errs, 2)

	_, err = admit.Admit([]byte(manifest("causes", "x: 1\nz: 2\n"+v1alpha2test.OneContainer)))
	var decodeErr *admit.DecodeError
	require.ErrorAs(t, err, &decodeErr)
	require.Equal(t, []string{`unknown field "spec.x"`, `unknown field "spec.z"`}, decodeErr.Causes)
	require.Equal(t, `MiniCluster in version "v1alpha2" cannot be handled as a MiniCluster: strict decoding error: unknown field "spec.x", unknown field "spec.z"`, err.Error())
}

// FuzzAdmit checks that Admit never panics, and that it either admits a named MiniCluster or
// refuses with an API status, as the server would.
func FuzzAdmit(f *testing.F) {
	for _, tt := range invalidCases() {
		f.Add(tt.body())
	}
	for _, name := range []string{"hello-world.yaml", "bursting-root.yaml", "volumes.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", name))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, manifest []byte) {
		mc, err := admit.Admit(manifest)
		if err == nil {
			require.NotEmpty(t, mc.Name)
			require.NotEmpty(t, mc.Spec.Containers)
			return
		}
		var status apierrors.APIStatus
		require.True(t, errors.As(err, &status), "not an API status: %v", err)
	})
}

// BenchmarkAdmit admits one example, as `fluxfed plan` does; the validators are built once.
func BenchmarkAdmit(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mpi-lammps.yaml"))
	require.NoError(b, err)
	_, err = admit.Admit(data)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := admit.Admit(data); err != nil {
			b.Fatal(err)
		}
	}
}

// server creates MiniClusters in the default namespace, where Admit places them.
type server struct {
	http *http.Client
	url  string
}

func newServer(t *testing.T, env *testenv.Env) *server {
	t.Helper()
	c, err := rest.HTTPClientFor(env.Config)
	require.NoError(t, err)
	return &server{
		http: c,
		url:  strings.TrimSuffix(env.Config.Host, "/") + "/apis/" + fluxv1alpha2.GroupVersion.String() + "/namespaces/" + metav1.NamespaceDefault + "/miniclusters?fieldValidation=Strict",
	}
}

// create posts the manifest as it is, in the media type kubectl would send it in, and returns
// the created object or the server's refusal as an *apierrors.StatusError.
func (s *server) create(t *testing.T, body []byte) (*unstructured.Unstructured, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/yaml")
	if utilyaml.IsJSONBuffer(body) {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	require.NoError(t, err)
	defer func() { require.NoError(t, resp.Body.Close()) }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusCreated {
		status := metav1.Status{}
		require.NoError(t, json.Unmarshal(raw, &status), "response %d: %s", resp.StatusCode, raw)
		return nil, &apierrors.StatusError{ErrStatus: status}
	}
	created := &unstructured.Unstructured{}
	require.NoError(t, created.UnmarshalJSON(raw))
	return created, nil
}

func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status), "not an API status: %v", err)
	return status.Status()
}

// causes lists "field: message" for every cause of an Invalid status.
func causes(s metav1.Status) []string {
	if s.Details == nil {
		return nil
	}
	var out []string
	for _, c := range s.Details.Causes {
		out = append(out, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	slices.Sort(out)
	return out
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// TestAdmitHostileSpecs checks that Admit, and so fluxfed plan, refuses or accepts every hostile
// spec as the API server does (api/v1alpha2's TestMiniClusterHostileSpecs).
func TestAdmitHostileSpecs(t *testing.T) {
	for _, tt := range v1alpha2test.HostileSpecs() {
		t.Run(tt.Name, func(t *testing.T) {
			mc, err := admit.Admit([]byte(manifest(tt.ObjectName(), tt.Spec)))
			if tt.Accepted() {
				require.NoError(t, err)
				require.NotNil(t, mc)
				return
			}
			var invalid *admit.InvalidError
			require.ErrorAs(t, err, &invalid)
			for _, c := range invalid.Errs {
				if strings.HasPrefix(c.Error(), tt.Field+": ") && strings.Contains(c.Error(), tt.Message) {
					return
				}
			}
			t.Fatalf("no cause at %s saying %q; Admit said:\n%s", tt.Field, tt.Message, err)
		})
	}
}
