package v1alpha2_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// These tests install the generated CRD into a real kube-apiserver: the schema (bounds, enums,
// CEL rules, defaults) is the API's validation, so only the API server can tell whether it works.
// They share one API server (testenv.Shared), each in a namespace of its own.

func TestMain(m *testing.M) { testenv.Main(m) }

// miniCluster builds a MiniCluster from the YAML of its spec.
func miniCluster(t *testing.T, namespace, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var specMap map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(spec), &specMap), "spec of %s", name)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specMap}}
	u.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func createStrict(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict))
}

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	return ns.Name
}

// causes lists "field: message" for every cause the API server gave.
func causes(err error) []string {
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.ErrStatus.Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.ErrStatus.Details.Causes {
		out = append(out, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	return out
}

func TestMiniClusterRejectsInvalidSpecs(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)

	ctx := context.Background()
	for _, tt := range v1alpha2test.InvalidCases() {
		t.Run(tt.Name, func(t *testing.T) {
			err := createStrict(ctx, env.Client, miniCluster(t, ns, tt.ObjectName(), tt.Spec))
			require.Error(t, err, "the API server accepted an invalid MiniCluster")
			require.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)

			want := tt.Field + ": "
			for _, c := range causes(err) {
				if strings.HasPrefix(c, want) && strings.Contains(c, tt.Message) {
					return
				}
			}
			t.Fatalf("no cause at %s saying %q; the API server said:\n%s", tt.Field, tt.Message, strings.Join(causes(err), "\n"))
		})
	}
}

// TestMiniClusterRejectsUnknownFields covers strict field validation: the v1alpha1 location of
// leadBroker (spec.flux.leadBroker) is not part of v1alpha2, in the Flux Operator's CRD either.
func TestMiniClusterRejectsUnknownFields(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)
	err := createStrict(context.Background(), env.Client,
		miniCluster(t, ns, "old-lead-broker", v1alpha2test.OneContainer+"flux:\n  leadBroker: {name: a, address: b}\n"))
	require.ErrorContains(t, err, `unknown field "spec.flux.leadBroker"`)

	// A burst's resources say cores and GPUs only: memory is not part of what Flux is told.
	err = createStrict(context.Background(), env.Client, miniCluster(t, ns, "burst-memory",
		v1alpha2test.OneContainer+"flux:\n  bursting:\n    clusters:\n    - {name: b, size: 1, resources: {cores: 4, memory: 1Gi}}\n"))
	require.ErrorContains(t, err, `unknown field "spec.flux.bursting.clusters[0].resources.memory"`)
}

// TestMiniClusterDefaults checks that the schema defaults appear in the stored object, so users
// see them with kubectl get -o yaml, and that nothing else is added.
func TestMiniClusterDefaults(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	// What every stored MiniCluster holds when its spec sets nothing else; each case lists
	// what it adds or changes on top.
	const defaulted = `
containers:
- image: rockylinux:9
  pullAlways: false
cleanup: false
deadlineSeconds: 31500000
flux:
  connectTimeout: 5s
  container:
    disable: false
    image: ghcr.io/converged-computing/flux-view-rocky:tag-9
    mountPath: /mnt/flux
    name: flux-view
    pullAlways: false
  logLevel: 6
  scheduler:
    queuePolicy: fcfs
interactive: false
network: {}
size: 1
tasks: 1
`
	tests := []struct {
		name string
		spec string
		// want is merged into defaulted: maps key by key, anything else replaced.
		want string
	}{
		{
			name: "minimal",
			spec: "containers:\n- image: rockylinux:9\n",
		},
		{
			name: "bursting",
			spec: `size: 2
containers:
- {image: rockylinux:9, commands: {pre: echo hi}, fluxUser: {}}
flux:
  bursting:
    clusters:
    - {name: burst-0, size: 3, cluster: member-a}
`,
			want: `
containers:
- image: rockylinux:9
  pullAlways: false
  commands:
    pre: echo hi
    runFluxAsRoot: false
  fluxUser:
    name: flux
    uid: 1000
flux:
  bursting:
    clusters:
    - {name: burst-0, size: 3, cluster: member-a}
size: 2
`,
		},
		{
			name: "lead broker port",
			spec: `containers: [{image: rockylinux:9}]
flux:
  bursting:
    leadBroker: {name: root, address: 127.0.0.10, size: 2}
`,
			want: `
flux:
  bursting:
    leadBroker: {name: root, address: 127.0.0.10, size: 2, port: 8050}
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := miniCluster(t, ns, strings.ReplaceAll(tt.name, " ", "-"), tt.spec)
			require.NoError(t, createStrict(ctx, env.Client, obj))

			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored))
			var want, changes map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(defaulted), &want))
			require.NoError(t, yaml.Unmarshal([]byte(tt.want), &changes))
			merge(want, changes)
			// Compare through JSON numbers: the stored object holds int64, the YAML float64.
			if diff := cmp.Diff(normalize(t, want), normalize(t, stored.Object["spec"])); diff != "" {
				t.Errorf("stored spec (-want +got):\n%s", diff)
			}
		})
	}
}

// merge writes changes into base: nested maps key by key, any other value replaced.
func merge(base, changes map[string]any) {
	for k, v := range changes {
		if sub, ok := v.(map[string]any); ok {
			if baseSub, ok := base[k].(map[string]any); ok {
				merge(baseSub, sub)
				continue
			}
		}
		base[k] = v
	}
}

func normalize(t *testing.T, v any) any {
	t.Helper()
	data, err := yaml.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, yaml.Unmarshal(data, &out))
	return out
}

// TestMiniClusterScaleSubresource checks that the scale subresource reads and writes spec.size
// (kubectl scale mc/x --replicas=N), and that the schema still bounds it: scaling past maxSize is
// rejected.
func TestMiniClusterScaleSubresource(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	mc := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, createStrict(ctx, env.Client, miniCluster(t, ns, "scaled", "size: 2\nmaxSize: 4\n"+v1alpha2test.OneContainer)))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scaled"}, mc))

	scale := &autoscalingv1.Scale{}
	require.NoError(t, env.Client.SubResource("scale").Get(ctx, mc, scale))
	require.Equal(t, int32(2), scale.Spec.Replicas)

	scale.Spec.Replicas = 3
	require.NoError(t, env.Client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale)))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc))
	require.Equal(t, int32(3), mc.Spec.Size)

	scale.Spec.Replicas = 5
	err := env.Client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))
	require.ErrorContains(t, err, "spec.size must not exceed spec.maxSize")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc))
	require.Equal(t, int32(3), mc.Spec.Size, "a rejected scale changes nothing")
}

// TestTheFluxLayoutIsFixedOnceCreated checks that the API server refuses every update that would
// change the hostlist of a running Flux instance (its brokers never learn a new one), says why,
// and lets everything else through, scaling within maxSize included.
func TestTheFluxLayoutIsFixedOnceCreated(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	const bursts = `flux:
  bursting:
    clusters:
    - {name: burst-a, size: 2, cluster: member-a}
    - {name: burst-b, size: 3}
    - {name: burst-c, size: 0, maxSize: 4, cluster: member-c}
`
	const child = `flux:
  bursting:
    leadBroker: {name: root, address: 127.0.0.10, size: 4, port: 30093}
`
	ranks := "the number of ranks of the Flux instance (spec.maxSize, or spec.size when maxSize is unset) is fixed"
	burstsFixed := "the bursts' names, order and reserved ranks (maxSize, or size without it) are fixed"
	tests := []struct {
		name   string
		spec   string
		change func(spec map[string]any)
		// field and message are the refusal's cause; empty means the update is accepted. Its
		// type is Forbidden unless cause says otherwise.
		field, message string
		cause          metav1.CauseType
	}{
		{name: "grow without maxSize", spec: "size: 2\n", change: set("size", 3), field: "spec.size", message: ranks},
		{name: "shrink without maxSize", spec: "size: 4\n", change: set("size", 2), field: "spec.size", message: ranks},
		{name: "grow within maxSize", spec: "size: 2\nmaxSize: 4\n", change: set("size", 4)},
		{name: "shrink within maxSize", spec: "size: 2\nmaxSize: 4\n", change: set("size", 1)},
		{name: "raise maxSize", spec: "size: 2\nmaxSize: 4\n", change: set("maxSize", 6), field: "spec.size", message: ranks},
		{name: "lower maxSize", spec: "size: 2\nmaxSize: 4\n", change: set("maxSize", 3), field: "spec.size", message: ranks},
		{name: "reserve the ranks it has", spec: "size: 4\n", change: func(s map[string]any) { s["size"], s["maxSize"] = 2, 4 }},
		{name: "an edit that keeps the layout", spec: "size: 2\n", change: set("interactive", true)},

		{name: "resize a burst", spec: bursts, change: burst(0, "size", 4), field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "grow a burst within its maxSize", spec: bursts, change: burst(2, "size", 4)},
		{name: "start a reserved burst", spec: bursts, change: burst(2, "size", 1)},
		{name: "grow a burst past its maxSize", spec: bursts, change: burst(2, "size", 5), field: "spec.flux.bursting.clusters[2].size", message: "size must not exceed maxSize", cause: metav1.CauseTypeFieldValueInvalid},
		{name: "give a burst the maxSize it has", spec: bursts, change: burst(0, "maxSize", 2)},
		{name: "describe a burst's hardware", spec: bursts, change: burst(1, "resources", map[string]any{"cores": 8, "gpus": 2})},
		{name: "give a burst a larger maxSize", spec: bursts, change: burst(0, "maxSize", 4), field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "change a burst's maxSize", spec: bursts, change: burst(2, "maxSize", 3), field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "stop a burst without maxSize", spec: bursts, change: burst(0, "size", 0), field: "spec.flux.bursting.clusters[0].size", message: "size 0 reserves no rank", cause: metav1.CauseTypeFieldValueInvalid},
		{name: "rename a burst", spec: bursts, change: burst(1, "name", "burst-c"), field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "reorder the bursts", spec: bursts, change: func(s map[string]any) {
			c := clusters(s)
			c[0], c[1] = c[1], c[0]
		}, field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "add a burst", spec: bursts, change: func(s map[string]any) {
			b := s["flux"].(map[string]any)["bursting"].(map[string]any)
			b["clusters"] = append(clusters(s), map[string]any{"name": "burst-c", "size": 1})
		}, field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "remove a burst", spec: bursts, change: func(s map[string]any) {
			b := s["flux"].(map[string]any)["bursting"].(map[string]any)
			b["clusters"] = clusters(s)[:1]
		}, field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "add bursts to a MiniCluster without", spec: "size: 2\n", change: func(s map[string]any) {
			s["flux"] = map[string]any{"bursting": map[string]any{"clusters": []any{map[string]any{"name": "burst-a", "size": 1}}}}
		}, field: "spec.flux.bursting.clusters", message: burstsFixed},
		{name: "move a burst to another member", spec: bursts, change: burst(0, "cluster", "member-b")},
		{name: "move a burst to another namespace", spec: bursts, change: burst(0, "namespace", "elsewhere")},
		{name: "push a reserved burst", spec: bursts, change: burst(1, "cluster", "member-b")},
		{name: "change the hostlist", spec: "flux:\n  bursting:\n    hostlist: root-[0-1],far-[0-3]\n", change: func(s map[string]any) {
			s["flux"].(map[string]any)["bursting"].(map[string]any)["hostlist"] = "root-[0-1],far-[0-4]"
		}, field: "spec.flux.bursting.hostlist", message: "spec.flux.bursting.hostlist is fixed"},
		{name: "add a hostlist", spec: "size: 2\n", change: func(s map[string]any) {
			s["flux"] = map[string]any{"bursting": map[string]any{"hostlist": "root-[0-1],far-[0-3]"}}
		}, field: "spec.flux.bursting.hostlist", message: "spec.flux.bursting.hostlist is fixed"},
		{name: "remove the hostlist", spec: "flux:\n  bursting:\n    hostlist: root-[0-1],far-[0-3]\n", change: func(s map[string]any) {
			delete(s["flux"].(map[string]any)["bursting"].(map[string]any), "hostlist")
		}, field: "spec.flux.bursting.hostlist", message: "spec.flux.bursting.hostlist is fixed"},
		{name: "move the lead broker", spec: child, change: leadBroker("address", "127.0.0.11")},
		{name: "change the lead broker's port", spec: child, change: leadBroker("port", 30094)},
		{name: "rename the lead broker", spec: child, change: leadBroker("name", "other"), field: "spec.flux.bursting.leadBroker", message: "leadBroker's name and size are fixed"},
		{name: "resize the lead broker", spec: child, change: leadBroker("size", 8), field: "spec.flux.bursting.leadBroker", message: "leadBroker's name and size are fixed"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := miniCluster(t, ns, fmt.Sprintf("layout-%d", i), tt.spec+v1alpha2test.OneContainer)
			require.NoError(t, createStrict(ctx, env.Client, obj))
			before := obj.GetResourceVersion()
			spec := obj.Object["spec"].(map[string]any)
			tt.change(spec)
			err := env.Client.Update(ctx, obj)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			requireCause(t, err, tt.field, tt.cause, tt.message)
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored))
			require.Equal(t, before, stored.GetResourceVersion(), "a refused update changes nothing")
		})
	}

	t.Run("scale past the ranks", func(t *testing.T) {
		mc := &fluxv1alpha2.MiniCluster{}
		require.NoError(t, createStrict(ctx, env.Client, miniCluster(t, ns, "unreserved", "size: 2\n"+v1alpha2test.OneContainer)))
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unreserved"}, mc))
		scale := &autoscalingv1.Scale{}
		require.NoError(t, env.Client.SubResource("scale").Get(ctx, mc, scale))
		scale.Spec.Replicas = 3
		err := env.Client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))
		require.ErrorContains(t, err, ranks)
	})
}

// requireCause fails unless err has a cause of type typ (Forbidden when empty) on field whose
// message contains want.
func requireCause(t *testing.T, err error, field string, typ metav1.CauseType, want string) {
	t.Helper()
	if typ == "" {
		typ = metav1.CauseTypeForbidden
	}
	var status *apierrors.StatusError
	require.True(t, errors.As(err, &status) && status.ErrStatus.Details != nil, "no causes in %v", err)
	for _, c := range status.ErrStatus.Details.Causes {
		if c.Field == field && c.Type == typ && strings.Contains(c.Message, want) {
			return
		}
	}
	require.Failf(t, "no such cause", "want %s: %s: ...%s..., got %v", field, typ, want, causes(err))
}

func set(key string, value any) func(map[string]any) {
	return func(spec map[string]any) { spec[key] = value }
}

func clusters(spec map[string]any) []any {
	return spec["flux"].(map[string]any)["bursting"].(map[string]any)["clusters"].([]any)
}

func burst(i int, key string, value any) func(map[string]any) {
	return func(spec map[string]any) { clusters(spec)[i].(map[string]any)[key] = value }
}

func leadBroker(key string, value any) func(map[string]any) {
	return func(spec map[string]any) {
		spec["flux"].(map[string]any)["bursting"].(map[string]any)["leadBroker"].(map[string]any)[key] = value
	}
}

// hostileSpecs are the specs with hostile values in fields that reach scripts and configuration
// files (v1alpha2test.HostileSpecs): each is refused with the field named, or stored as it is and
// made safe by the renderers, which package scripts proves by running what it renders.
var hostileSpecs = v1alpha2test.HostileSpecs()

func TestMiniClusterHostileSpecs(t *testing.T) {
	env := testenv.Shared(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	require.GreaterOrEqual(t, len(hostileSpecs), 40)
	names := map[string]bool{}
	for _, tt := range hostileSpecs {
		require.False(t, names[tt.ObjectName()], "two cases named %s", tt.ObjectName())
		names[tt.ObjectName()] = true
		t.Run(tt.Name, func(t *testing.T) {
			obj := miniCluster(t, ns, tt.ObjectName(), tt.Spec)
			err := createStrict(ctx, env.Client, obj)
			if tt.Accepted() {
				require.NoError(t, err, "the API server refused a spec the renderers must make safe")
				stored := &unstructured.Unstructured{}
				stored.SetGroupVersionKind(obj.GroupVersionKind())
				require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored))
				var sent map[string]any
				require.NoError(t, yaml.Unmarshal([]byte(tt.Spec), &sent))
				requireContains(t, normalize(t, stored.Object["spec"]), normalize(t, sent))
				return
			}
			require.Error(t, err, "the API server accepted a hostile spec")
			require.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
			var status *apierrors.StatusError
			require.ErrorAs(t, err, &status)
			require.NotNil(t, status.ErrStatus.Details)
			for _, c := range status.ErrStatus.Details.Causes {
				if c.Field == tt.Field && strings.Contains(c.Message, tt.Message) {
					return
				}
			}
			t.Fatalf("no cause at %s saying %q; the API server said:\n%s", tt.Field, tt.Message, strings.Join(causes(err), "\n"))
		})
	}
}

// requireContains fails unless every value of want is in got at the same place: the API server
// stored what was sent, unchanged, next to its defaults.
func requireContains(t *testing.T, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		require.True(t, ok, "want a map, got %#v", got)
		for k, v := range w {
			requireContains(t, g[k], v)
		}
	case []any:
		g, ok := got.([]any)
		require.True(t, ok, "want a list, got %#v", got)
		require.Len(t, g, len(w))
		for i := range w {
			requireContains(t, g[i], w[i])
		}
	default:
		require.Equal(t, want, got)
	}
}
