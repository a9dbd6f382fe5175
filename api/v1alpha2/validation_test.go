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
	"github.com/fluxfed/fluxfed/e2e/testenv"
)

// These tests install the generated CRD into a real kube-apiserver: the schema (bounds, enums,
// CEL rules, defaults) is the API's validation, so only the API server can tell whether it works.

const (
	oneContainer = "containers:\n- image: rockylinux:9\n  command: hostname\n"
	name61       = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	name62       = name61 + "b"
)

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
	env := testenv.Start(t)
	ns := newNamespace(t, env.Client)

	burst := func(entries string) string {
		return oneContainer + "flux:\n  bursting:\n    clusters:\n" + entries
	}
	tests := []struct {
		name string
		// metaName is metadata.name; the case name when empty.
		metaName string
		spec     string
		// field is the path the API server names; message is part of what it says there.
		field   string
		message string
	}{
		// Sizes.
		{name: "size zero", spec: "size: 0\n" + oneContainer, field: "spec.size", message: "greater than or equal to 1"},
		{name: "size above maxSize", spec: "size: 4\nmaxSize: 2\n" + oneContainer, field: "spec.maxSize", message: "spec.size must not exceed spec.maxSize"},
		{name: "minSize above size", spec: "size: 2\nminSize: 3\n" + oneContainer, field: "spec.minSize", message: "spec.minSize must not be larger than spec.size"},
		{name: "negative tasks", spec: "tasks: -1\n" + oneContainer, field: "spec.tasks", message: "greater than or equal to 0"},
		{name: "zero deadline", spec: "deadlineSeconds: 0\n" + oneContainer, field: "spec.deadlineSeconds", message: "greater than or equal to 1"},

		// Containers.
		{name: "no containers", spec: "containers: []\n", field: "spec.containers", message: "at least 1 items"},
		{name: "two flux containers", spec: "containers:\n- {image: a, runFlux: true}\n- {image: b, name: b, runFlux: true}\n", field: "spec.containers", message: "at most one container may set runFlux: true"},
		{name: "no flux container among two", spec: "containers:\n- {image: a, name: a}\n- {image: b, name: b}\n", field: "spec.containers", message: "one of them must set runFlux: true"},
		{name: "unnamed sidecar", spec: "containers:\n- {image: a, runFlux: true}\n- {image: b}\n", field: "spec.containers", message: "every container that does not run Flux needs a name"},
		{name: "command and script", spec: "containers:\n- image: a\n  command: hostname\n  commands: {script: 'echo hi'}\n", field: "spec.containers", message: "cannot set both command and commands.script"},
		{name: "command and script with runFlux", spec: "containers:\n- image: a\n  runFlux: true\n  command: hostname\n  commands: {script: 'echo hi'}\n- {image: b, name: b}\n", field: "spec.containers", message: "cannot set both command and commands.script"},
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
		{name: "lead broker port zero", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2, port: 0}\n", field: "spec.flux.bursting.leadBroker.port", message: "greater than or equal to 1"},
		{name: "lead broker port too high", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2, port: 70000}\n", field: "spec.flux.bursting.leadBroker.port", message: "less than or equal to 65535"},
		{name: "lead broker without address", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2}\n", field: "spec.flux.bursting.leadBroker.address", message: "Required value"},
		{name: "lead broker IPv6 address", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2, address: 'fd00::1'}\n", field: "spec.flux.bursting.leadBroker.address", message: "should match"},
		{name: "lead broker hostnames too long", spec: oneContainer + "flux:\n  bursting:\n    leadBroker: {name: " + name62 + ", address: 1.2.3.4, size: 11}\n", field: "spec.flux.bursting.leadBroker.name", message: "leadBroker.name is too long for its size"},
		{name: "expose type ClusterIP", spec: oneContainer + "flux:\n  bursting:\n    expose: {type: ClusterIP}\n", field: "spec.flux.bursting.expose.type", message: `supported values: "NodePort", "LoadBalancer"`},
		{name: "expose nodePort too high", spec: oneContainer + "flux:\n  bursting:\n    expose: {nodePort: 70000}\n", field: "spec.flux.bursting.expose.nodePort", message: "less than or equal to 65535"},
		{name: "expose IPv6 address", spec: oneContainer + "flux:\n  bursting:\n    expose: {address: 'fd00::1'}\n", field: "spec.flux.bursting.expose.address", message: "should match"},

		// Names: every pod hostname '<name>-<index>' must be a DNS label.
		{name: "root hostnames too long for maxSize", metaName: name61, spec: "size: 2\nmaxSize: 100\n" + oneContainer, field: "metadata", message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{name: "root hostnames too long for size", metaName: name61, spec: "size: 11\n" + oneContainer, field: "metadata", message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{name: "root name with a dot", metaName: "a.b", spec: oneContainer, field: "metadata", message: "metadata.name must be a DNS label"},

		// Flux settings.
		{name: "unknown queue policy", spec: oneContainer + "flux:\n  scheduler: {queuePolicy: lifo}\n", field: "spec.flux.scheduler.queuePolicy", message: `supported values: "fcfs", "easy", "hybrid", "conservative"`},
		{name: "log level above 7", spec: oneContainer + "flux:\n  logLevel: 8\n", field: "spec.flux.logLevel", message: "less than or equal to 7"},
		{name: "connect timeout not a duration", spec: oneContainer + "flux:\n  connectTimeout: soon\n", field: "spec.flux.connectTimeout", message: "should match"},
		{name: "relative flux mount path", spec: oneContainer + "flux:\n  container: {mountPath: mnt/flux}\n", field: "spec.flux.container.mountPath", message: "should match '^/'"},
		{name: "headless name not a DNS label", spec: oneContainer + "network: {headlessName: Flux_Service}\n", field: "spec.network.headlessName", message: "should match"},

		// Pod settings.
		{name: "restart policy Always", spec: oneContainer + "pod: {restartPolicy: Always}\n", field: "spec.pod.restartPolicy", message: `supported values: "OnFailure", "Never"`},
		{name: "unknown toleration effect", spec: oneContainer + "pod:\n  tolerations: [{key: a, effect: Sometimes}]\n", field: "spec.pod.tolerations[0].effect", message: "Unsupported value"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.metaName
			if name == "" {
				name = strings.ReplaceAll(tt.name, " ", "-")
			}
			err := createStrict(ctx, env.Client, miniCluster(t, ns, name, tt.spec))
			require.Error(t, err, "the API server accepted an invalid MiniCluster")
			require.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)

			want := tt.field + ": "
			for _, c := range causes(err) {
				if strings.HasPrefix(c, want) && strings.Contains(c, tt.message) {
					return
				}
			}
			t.Fatalf("no cause at %s saying %q; the API server said:\n%s", tt.field, tt.message, strings.Join(causes(err), "\n"))
		})
	}
}

// TestMiniClusterRejectsUnknownFields covers strict field validation: the v1alpha1 location of
// leadBroker (spec.flux.leadBroker) is not part of v1alpha2, in the Flux Operator's CRD either.
func TestMiniClusterRejectsUnknownFields(t *testing.T) {
	env := testenv.Start(t)
	ns := newNamespace(t, env.Client)
	err := createStrict(context.Background(), env.Client,
		miniCluster(t, ns, "old-lead-broker", oneContainer+"flux:\n  leadBroker: {name: a, address: b}\n"))
	require.ErrorContains(t, err, `unknown field "spec.flux.leadBroker"`)
}

// TestMiniClusterDefaults checks that the schema defaults appear in the stored object, so users
// see them with kubectl get -o yaml, and that nothing else is added.
func TestMiniClusterDefaults(t *testing.T) {
	env := testenv.Start(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	tests := []struct {
		name string
		spec string
		want string
	}{
		{
			name: "minimal",
			spec: "containers:\n- image: rockylinux:9\n",
			want: `
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
network:
  headlessName: flux-service
size: 1
tasks: 1
`,
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
cleanup: false
deadlineSeconds: 31500000
flux:
  bursting:
    clusters:
    - {name: burst-0, size: 3, cluster: member-a}
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
network:
  headlessName: flux-service
size: 2
tasks: 1
`,
		},
		{
			name: "lead broker port",
			spec: `containers: [{image: rockylinux:9}]
flux:
  bursting:
    leadBroker: {name: root, address: 192.0.2.10, size: 2}
`,
			want: `
containers:
- image: rockylinux:9
  pullAlways: false
cleanup: false
deadlineSeconds: 31500000
flux:
  bursting:
    leadBroker: {name: root, address: 192.0.2.10, size: 2, port: 8050}
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
network:
  headlessName: flux-service
size: 1
tasks: 1
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
			var want map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tt.want), &want))
			// Compare through JSON numbers: the stored object holds int64, the YAML float64.
			if diff := cmp.Diff(normalize(t, want), normalize(t, stored.Object["spec"])); diff != "" {
				t.Errorf("stored spec (-want +got):\n%s", diff)
			}
		})
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
	env := testenv.Start(t)
	ns := newNamespace(t, env.Client)
	ctx := context.Background()

	mc := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, createStrict(ctx, env.Client, miniCluster(t, ns, "scaled", "size: 2\nmaxSize: 4\n"+oneContainer)))
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
