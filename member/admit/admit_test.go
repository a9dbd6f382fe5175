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
	"github.com/fluxfed/fluxfed/e2e/testenv"
	"github.com/fluxfed/fluxfed/member/admit"
)

// The tables below are run twice: offline, where Admit must refuse each invalid manifest with the
// named cause, and against a real kube-apiserver with the CRD installed, where every cause the
// server gives must be one Admit gives, and every valid manifest must be stored with the spec that
// Admit returns.

const (
	oneContainer = "containers:\n- image: rockylinux:9\n  command: hostname\n"
	name61       = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	name62       = name61 + "b"
)

// manifest is a MiniCluster manifest with the given name and the YAML of its spec.
func manifest(name, spec string) string {
	return "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: " + name +
		"\nspec:\n  " + strings.ReplaceAll(strings.TrimSuffix(spec, "\n"), "\n", "\n  ") + "\n"
}

type invalidCase struct {
	name string
	// manifest is the whole manifest; when empty, one is built from metaName (the case name with
	// dashes when empty) and spec.
	manifest string
	metaName string
	spec     string
	// field and message name one cause Admit must give: the field path, and part of the message.
	// For a refusal before validation (Bad Request), field is empty and message is part of it.
	field   string
	message string
}

func (c invalidCase) body() []byte {
	if c.manifest != "" {
		return []byte(c.manifest)
	}
	name := c.metaName
	if name == "" {
		name = strings.ReplaceAll(c.name, " ", "-")
	}
	return []byte(manifest(name, c.spec))
}

func invalidCases() []invalidCase {
	burst := func(entries string) string {
		return oneContainer + "flux:\n  bursting:\n    clusters:\n" + entries
	}
	return []invalidCase{
		// Sizes.
		{name: "size zero", spec: "size: 0\n" + oneContainer, field: "spec.size", message: "spec.size in body should be greater than or equal to 1"},
		{name: "size above maxSize", spec: "size: 4\nmaxSize: 2\n" + oneContainer, field: "spec.maxSize", message: "spec.size must not exceed spec.maxSize"},
		{name: "minSize above size", spec: "size: 2\nminSize: 3\n" + oneContainer, field: "spec.minSize", message: "spec.minSize must not be larger than spec.size"},
		{name: "negative tasks", spec: "tasks: -1\n" + oneContainer, field: "spec.tasks", message: "greater than or equal to 0"},
		{name: "zero deadline", spec: "deadlineSeconds: 0\n" + oneContainer, field: "spec.deadlineSeconds", message: "greater than or equal to 1"},
		{name: "size not an integer", spec: "size: two\n" + oneContainer, field: "spec.size", message: `Invalid value: "string": spec.size in body must be of type integer: "string"`},
		{name: "fractional size", spec: "size: 2.5\n" + oneContainer, field: "spec.size", message: "must be of type int32"},
		{name: "size beyond int32", spec: "size: 3000000000\n" + oneContainer, field: ".spec.size", message: "should be less than or equal to 2147483647"},

		// Containers.
		{name: "no containers", spec: "containers: []\n", field: "spec.containers", message: "at least 1 items"},
		{name: "containers missing", spec: "size: 2\n", field: "spec.containers", message: "Required value"},
		{name: "two flux containers", spec: "containers:\n- {image: a, runFlux: true}\n- {image: b, name: b, runFlux: true}\n", field: "spec.containers", message: "at most one container may set runFlux: true"},
		{name: "no flux container among two", spec: "containers:\n- {image: a, name: a}\n- {image: b, name: b}\n", field: "spec.containers", message: "one of them must set runFlux: true"},
		{name: "unnamed sidecar", spec: "containers:\n- {image: a, runFlux: true}\n- {image: b}\n", field: "spec.containers", message: "every container that does not run Flux needs a name"},
		{name: "command and script", spec: "containers:\n- image: a\n  command: hostname\n  commands: {script: 'echo hi'}\n", field: "spec.containers", message: "cannot set both command and commands.script"},
		{name: "duplicate container names", spec: "containers:\n- {image: a, name: x, runFlux: true}\n- {image: b, name: x}\n", field: "spec.containers", message: "container names must be unique"},
		{name: "container name not a DNS label", spec: "containers:\n- {image: a, name: App}\n", field: "spec.containers[0].name", message: "should match"},
		{name: "launcher and batch", spec: "containers:\n- {image: a, launcher: true, batch: true}\n", field: "spec.containers[0]", message: "launcher and batch cannot both be true"},
		{name: "claim without path", spec: "containers:\n- image: a\n  volumes:\n    data: {claimName: data}\n", field: "spec.containers[0].volumes[data]", message: "also needs path"},
		{name: "volume name not a DNS label", spec: "containers:\n- image: a\n  volumes:\n    Data: {path: /data}\n", field: "spec.containers[0].volumes", message: "every volume name must be a DNS label"},
		{name: "volume in volumes and existingVolumes", spec: "containers:\n- image: a\n  volumes:\n    data: {path: /data}\n  existingVolumes:\n    data: {path: /data2}\n", field: "spec.containers[0]", message: "must not appear in both volumes and existingVolumes"},
		{name: "unnamed service", spec: oneContainer + "services:\n- {image: nginx}\n", field: "spec.services", message: "every service container needs a name"},
		{name: "port zero", spec: "containers:\n- {image: a, ports: [0]}\n", field: "spec.containers[0].ports[0]", message: "greater than or equal to 1"},
		{name: "unknown pull policy", spec: "containers:\n- {image: a, imagePullPolicy: Sometimes}\n", field: "spec.containers[0].imagePullPolicy", message: `supported values: "Always", "IfNotPresent", "Never"`},
		{name: "bad cpu quantity", spec: "containers:\n- image: a\n  resources: {limits: {cpu: lots}}\n", field: "spec.containers[0].resources.limits.cpu", message: "should match"},

		// Bursting.
		{name: "duplicate burst names", spec: burst("    - {name: b, size: 1}\n    - {name: b, size: 2}\n"), field: "spec.flux.bursting.clusters[1]", message: "Duplicate value"},
		{name: "burst name not a DNS label", spec: burst("    - {name: Burst_0, size: 1}\n"), field: "spec.flux.bursting.clusters[0].name", message: "should match"},
		{name: "burst named like the root", metaName: "same", spec: burst("    - {name: same, size: 1}\n"), field: "spec.flux.bursting.clusters", message: "must differ from metadata.name"},
		{name: "burst size zero", spec: burst("    - {name: b, size: 0}\n"), field: "spec.flux.bursting.clusters[0].size", message: "greater than or equal to 1"},
		{name: "burst without size", spec: burst("    - {name: b}\n"), field: "spec.flux.bursting.clusters[0].size", message: "Required value"},
		{name: "burst without name", spec: burst("    - {size: 2}\n"), field: "spec.flux.bursting.clusters[0].name", message: "Required value"},
		{name: "burst hostnames too long", spec: burst("    - {name: " + name62 + ", size: 11}\n"), field: "spec.flux.bursting.clusters[0].name", message: "every burst hostname '<name>-<index>' must fit in 63 characters"},
		{name: "cluster not a DNS name", spec: burst("    - {name: b, size: 1, cluster: Gke_West}\n"), field: "spec.flux.bursting.clusters[0].cluster", message: "should match"},
		{name: "namespace not a DNS label", spec: burst("    - {name: b, size: 1, cluster: w, namespace: a.b}\n"), field: "spec.flux.bursting.clusters[0].namespace", message: "should match"},
		{name: "hostlist and clusters", spec: oneContainer + "flux:\n  bursting:\n    hostlist: 'x-[0-3]'\n    clusters:\n    - {name: b, size: 1}\n", field: "spec.flux.bursting", message: "set either hostlist or clusters, not both"},
		{name: "cluster on a burst child", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2}\n    clusters:\n    - {name: cluster-on-a-burst-child, size: 1, cluster: west}\n", field: "spec.flux.bursting.clusters", message: "a burst child does not burst further"},
		{name: "lead broker port too high", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2, port: 70000}\n", field: "spec.flux.bursting.leadBroker.port", message: "less than or equal to 65535"},
		{name: "lead broker without address", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2}\n", field: "spec.flux.bursting.leadBroker.address", message: "Required value"},
		{name: "lead broker IPv6 address", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2, address: 'fd00::1'}\n", field: "spec.flux.bursting.leadBroker.address", message: "should match"},
		{name: "lead broker hostnames too long", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: " + name62 + ", address: 1.2.3.4, size: 11}\n", field: "spec.flux.bursting.leadBroker.name", message: "leadBroker.name is too long for its size"},
		{name: "expose type ClusterIP", spec: oneContainer + "flux:\n  bursting:\n    expose: {type: ClusterIP}\n", field: "spec.flux.bursting.expose.type", message: `supported values: "NodePort", "LoadBalancer"`},
		{name: "expose IPv6 address", spec: oneContainer + "flux:\n  bursting:\n    expose: {address: 'fd00::1'}\n", field: "spec.flux.bursting.expose.address", message: "should match"},

		// Names: every pod hostname '<name>-<index>' must be a DNS label.
		{name: "root hostnames too long for maxSize", metaName: name61, spec: "size: 2\nmaxSize: 100\n" + oneContainer, field: "metadata", message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{name: "root hostnames too long for size", metaName: name61, spec: "size: 11\n" + oneContainer, field: "metadata", message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{name: "root name with a dot", metaName: "a.b", spec: oneContainer, field: "metadata", message: "metadata.name must be a DNS label"},
		{name: "root name in capitals", metaName: "Hello", spec: oneContainer, field: "metadata.name", message: "a lowercase RFC 1123 subdomain"},

		// Flux settings.
		{name: "unknown queue policy", spec: oneContainer + "flux:\n  scheduler: {queuePolicy: lifo}\n", field: "spec.flux.scheduler.queuePolicy", message: `supported values: "fcfs", "easy", "hybrid", "conservative"`},
		{name: "log level above 7", spec: oneContainer + "flux:\n  logLevel: 8\n", field: "spec.flux.logLevel", message: "less than or equal to 7"},
		{name: "connect timeout not a duration", spec: oneContainer + "flux:\n  connectTimeout: soon\n", field: "spec.flux.connectTimeout", message: "should match"},
		{name: "relative flux mount path", spec: oneContainer + "flux:\n  container: {mountPath: mnt/flux}\n", field: "spec.flux.container.mountPath", message: "should match '^/'"},
		{name: "headless name not a DNS label", spec: oneContainer + "network: {headlessName: Flux_Service}\n", field: "spec.network.headlessName", message: "should match"},

		// Pod settings.
		{name: "restart policy Always", spec: oneContainer + "pod: {restartPolicy: Always}\n", field: "spec.pod.restartPolicy", message: `supported values: "OnFailure", "Never"`},
		{name: "unknown toleration effect", spec: oneContainer + "pod:\n  tolerations: [{key: a, effect: Sometimes}]\n", field: "spec.pod.tolerations[0].effect", message: "Unsupported value"},

		// Metadata.
		{name: "no name", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nspec:\n  " + strings.ReplaceAll(oneContainer, "\n", "\n  "), field: "metadata.name", message: "Required value: name or generateName is required"},
		{name: "invalid label", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: invalid-label\n  labels: {'a b': c}\nspec:\n  containers: [{image: a}]\n", field: "metadata.labels", message: "name part must consist of alphanumeric characters"},
		{name: "no spec", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: no-spec}\n", field: "spec", message: "Required value"},
		{name: "wrong kind", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniClusterSet\nmetadata: {name: wrong-kind}\nspec: {containers: [{image: a}]}\n", field: "kind", message: "must be MiniCluster"},

		// Refused before validation: strict field validation and decoding.
		{name: "unknown spec field", manifest: manifest("unknown-spec-field", "sizee: 2\n"+oneContainer), message: `strict decoding error: unknown field "spec.sizee"`},
		{name: "v1alpha1 lead broker", manifest: manifest("v1alpha1-lead-broker", oneContainer+"flux:\n  leadBroker: {name: a, address: b}\n"), message: `unknown field "spec.flux.leadBroker"`},
		{name: "unknown container fields", manifest: manifest("unknown-container-fields", "containers:\n- {image: a, imagee: b, env: {A: b}}\n"), message: `unknown field "spec.containers[0].env", unknown field "spec.containers[0].imagee"`},
		{name: "unknown metadata field", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: unknown-metadata-field, label: {a: b}}\nspec: {containers: [{image: a}]}\n", message: `unknown field "metadata.label"`},
		{name: "unknown top-level field", manifest: manifest("unknown-top-level-field", oneContainer) + "specs: {}\n", message: `unknown field "specs"`},
		{name: "duplicate YAML field", manifest: manifest("duplicate-yaml-field", "size: 2\nsize: 3\n"+oneContainer), message: `key "size" already set in map`},
		{name: "duplicate JSON field", manifest: `{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "metadata": {"name": "duplicate-json-field"}, "spec": {"size": 2, "size": 3, "containers": [{"image": "a"}]}}`, message: `duplicate field "spec.size"`},
		{name: "unknown JSON field", manifest: `{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "metadata": {"name": "unknown-json-field"}, "spec": {"containers": [{"image": "a", "cmd": "x"}]}}`, message: `unknown field "spec.containers[0].cmd"`},
		{name: "malformed labels", manifest: "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: malformed-labels, labels: 3}\nspec: {containers: [{image: a}]}\n", message: "cannot unmarshal number"},
		{name: "older apiVersion", manifest: "apiVersion: flux-framework.org/v1alpha1\nkind: MiniCluster\nmetadata: {name: older-api-version}\nspec: {containers: [{image: a}]}\n", message: `MiniCluster in version "v1alpha1" cannot be handled as a MiniCluster: strict decoding error: unknown field "spec"`},
		{name: "no apiVersion", manifest: "kind: MiniCluster\nmetadata: {name: no-api-version}\nspec: {containers: [{image: a}]}\n", message: "the API version in the data () does not match the expected API version (flux-framework.org/v1alpha2)"},
		{name: "no kind", manifest: "apiVersion: flux-framework.org/v1alpha2\nmetadata: {name: no-kind}\nspec: {containers: [{image: a}]}\n", message: "Object 'Kind' is missing"},
		{name: "resourceVersion set", manifest: strings.Replace(manifest("resource-version-set", oneContainer), "name: resource-version-set", "name: resource-version-set\n  resourceVersion: '5'", 1), message: "resourceVersion should not be set on objects to be created"},
		{name: "not an object", manifest: "- apiVersion: flux-framework.org/v1alpha2\n", message: "cannot unmarshal array"},
	}
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

	out["nulls are defaulted"] = []byte(manifest("nulls-are-defaulted", "size: null\ntasks: null\nflux: {logLevel: null, scheduler: null}\n"+oneContainer))
	out["status is dropped"] = []byte(manifest("status-is-dropped", "size: 3\n"+oneContainer) + "status: {size: 3, ready: 3}\n")
	out["lead broker port"] = []byte(manifest("lead-broker-port", oneContainer+"flux:\n  bursting:\n    leadBroker: {name: root, address: 192.0.2.10, size: 2}\n"))
	out["quantities as numbers"] = []byte(manifest("quantities-as-numbers", "containers:\n- image: a\n  resources: {limits: {cpu: 2, memory: 1Gi}}\n"))
	out["comment document first"] = []byte("# nothing here\n---\n" + manifest("comment-document-first", oneContainer))
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
	require.Equal(t, "flux-service", mc.Spec.Network.HeadlessName)
	require.Equal(t, "/mnt/flux", mc.Spec.Flux.Container.MountPath)
	require.Equal(t, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"), mc.GroupVersionKind())

	mc, err = admit.Admit([]byte(strings.Replace(manifest("elsewhere", oneContainer), "name: elsewhere", "name: elsewhere\n  namespace: team-a", 1)))
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
		{name: "two objects", manifest: manifest("a", oneContainer) + "---\n" + manifest("b", oneContainer), message: "the manifest holds 2 objects"},
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
	_, err := admit.Admit([]byte(manifest("causes", "size: 0\ntasks: -1\n"+oneContainer)))
	var invalid *admit.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "causes", invalid.Name)
	require.Equal(t, `MiniCluster.flux-framework.org "causes" is invalid: [`+
		`spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1, `+
		`spec.tasks: Invalid value: -1: spec.tasks in body should be greater than or equal to 0]`, err.Error())
	require.Len(t, invalid.Errs, 2)

	_, err = admit.Admit([]byte(manifest("causes", "x: 1\nz: 2\n"+oneContainer)))
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
