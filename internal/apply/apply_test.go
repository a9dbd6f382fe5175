package apply_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

const ours = "apply-test"

// TestApply runs the applier's scenarios on one API server, each in a namespace of its own.
func TestApply(t *testing.T) {
	env := testenv.Start(t)
	for _, tt := range []struct {
		name string
		test func(*testing.T, *harness)
	}{
		{"creates once and then sends nothing", testApplyCreatesOnceAndThenSendsNothing},
		{"restores what someone else changed", testApplyRestoresWhatSomeoneElseChanged},
		{"drops what the desired state no longer has", testApplyDropsWhatTheDesiredStateNoLongerHas},
		{"finds its own object outside the cache", testApplyFindsItsOwnObjectOutsideTheCache},
		{"never touches what is not ours", testApplyNeverTouchesWhatIsNotOurs},
		{"lands only on the object it observed", testApplyLandsOnlyOnTheObjectItObserved},
		{"never writes to an object created since it was read", testApplyNeverWritesToAnObjectCreatedSinceItWasRead},
		{"created objects are applied", testApplyCreatedObjectsAreApplied},
		{"refusals carry their reason", testApplyRefusalsCarryTheirReason},
		{"typed objects and apply configurations are the same request", testApplyTakesTypedObjects},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.test(t, start(t, env)) })
	}
}

// harness is an applier whose cache holds only objects labelled "ours", in a namespace of its
// own, without their managedFields, and a count of the applier's requests.
type harness struct {
	env      *testenv.Env
	ns       string
	applier  *apply.Applier
	owner    *corev1.ConfigMap
	mu       sync.Mutex
	requests []string
	// beforeWrite, when set, runs once before the next request that is not a read.
	beforeWrite func()
}

func start(t *testing.T, env *testenv.Env) *harness {
	t.Helper()
	h := &harness{env: env}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	h.ns = ns.Name
	cfg := rest.CopyConfig(h.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") != "true" {
				h.mu.Lock()
				h.requests = append(h.requests, req.Method+" "+req.URL.Path)
				hook := h.beforeWrite
				if req.Method != http.MethodGet {
					h.beforeWrite = nil
				}
				h.mu.Unlock()
				if hook != nil && req.Method != http.MethodGet {
					hook()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	// As fluxfed's caches do, it holds objects without their managedFields.
	c, err := cache.New(cfg, cache.Options{Scheme: h.env.Scheme, DefaultNamespaces: map[string]cache.Config{h.ns: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{ours: "true"}), DefaultTransform: cache.TransformStripManagedFields()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	cl, err := client.New(cfg, client.Options{Scheme: h.env.Scheme, Cache: &client.CacheOptions{Reader: c}})
	require.NoError(t, err)
	live, err := client.New(cfg, client.Options{Scheme: h.env.Scheme})
	require.NoError(t, err)
	h.applier = &apply.Applier{Client: cl, Live: live, FieldOwner: "fluxfed-test"}

	// Everything the applier creates is controlled by this ConfigMap.
	h.owner = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: h.ns}}
	require.NoError(t, h.env.Client.Create(ctx, h.owner))
	return h
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (h *harness) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

func (h *harness) since(mark int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests[mark:]...)
}

// configMap is the desired ConfigMap "flux-config" with data.
func (h *harness) configMap(data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": data}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(h.ns)
	u.SetName("flux-config")
	u.SetLabels(map[string]string{ours: "true"})
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(h.owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))})
	return u
}

func (h *harness) apply(t *testing.T, desired *unstructured.Unstructured) (client.Object, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.applier.Apply(ctx, desired, apply.ControlledBy(h.owner))
}

// settled applies desired until the cache has caught up: an apply that sends nothing.
func (h *harness) settled(t *testing.T, desired *unstructured.Unstructured) {
	t.Helper()
	require.Eventually(t, func() bool {
		m := h.mark()
		_, err := h.apply(t, desired)
		require.NoError(t, err)
		return len(h.since(m)) == 0
	}, 10*time.Second, 20*time.Millisecond, "the applier kept sending requests for an unchanged object")
}

func (h *harness) stored(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(t, h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "flux-config"}, cm))
	return cm
}

func testApplyCreatesOnceAndThenSendsNothing(t *testing.T, h *harness) {
	desired := h.configMap(map[string]any{"broker.toml": "a", "hostlist": "root-[0-1]"})
	got, err := h.apply(t, desired)
	require.NoError(t, err)
	require.NotEmpty(t, got.GetUID(), "the stored object is returned")
	require.Equal(t, "a", got.(*corev1.ConfigMap).Data["broker.toml"])
	require.Equal(t, []string{"broker.toml", "hostlist"}, keys(h.stored(t).Data))
	h.settled(t, desired)
}

func testApplyRestoresWhatSomeoneElseChanged(t *testing.T, h *harness) {
	desired := h.configMap(map[string]any{"broker.toml": "a"})
	_, err := h.apply(t, desired)
	require.NoError(t, err)
	h.settled(t, desired)

	// A hand edit of a key fluxfed owns, and a key of someone else's.
	cm := h.stored(t)
	cm.Data["broker.toml"] = "edited"
	cm.Data["theirs"] = "kept"
	require.NoError(t, h.env.Client.Update(context.Background(), cm))
	require.Eventually(t, func() bool {
		_, err := h.apply(t, desired)
		require.NoError(t, err)
		return h.stored(t).Data["broker.toml"] == "a"
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "kept", h.stored(t).Data["theirs"], "a field fluxfed does not own is left alone")
	h.settled(t, desired)

	// Deleted: created again.
	require.NoError(t, h.env.Client.Delete(context.Background(), h.stored(t)))
	require.Eventually(t, func() bool {
		_, err := h.apply(t, desired)
		require.NoError(t, err)
		cm := &corev1.ConfigMap{}
		return h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "flux-config"}, cm) == nil
	}, 10*time.Second, 20*time.Millisecond)
}

func testApplyDropsWhatTheDesiredStateNoLongerHas(t *testing.T, h *harness) {
	_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "a", "old": "x"}))
	require.NoError(t, err)
	smaller := h.configMap(map[string]any{"broker.toml": "a"})
	require.Eventually(t, func() bool {
		_, err := h.apply(t, smaller)
		require.NoError(t, err)
		_, found := h.stored(t).Data["old"]
		return !found
	}, 10*time.Second, 20*time.Millisecond, "a key fluxfed stopped sending stays")
}

func testApplyFindsItsOwnObjectOutsideTheCache(t *testing.T, h *harness) {
	desired := h.configMap(map[string]any{"broker.toml": "a"})
	_, err := h.apply(t, desired)
	require.NoError(t, err)
	// Someone strips the label the cache selects on: the object vanishes from the cache, the
	// live read finds it is still ours, and the apply puts the label back.
	cm := h.stored(t)
	delete(cm.Labels, ours)
	require.NoError(t, h.env.Client.Update(context.Background(), cm))
	require.Eventually(t, func() bool {
		_, err := h.apply(t, desired)
		require.NoError(t, err)
		return h.stored(t).Labels[ours] == "true"
	}, 10*time.Second, 20*time.Millisecond)
}

func testApplyNeverTouchesWhatIsNotOurs(t *testing.T, h *harness) {
	ctx := context.Background()
	// Someone else's ConfigMap of the same name: not labelled, so the cache does not see it.
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flux-config", Namespace: h.ns}, Data: map[string]string{"password": "s3cret"}}
	require.NoError(t, h.env.Client.Create(ctx, theirs))
	// And one that carries our label, but another owner.
	_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "a"}))
	var refusal *apply.Refusal
	require.True(t, errors.As(err, &refusal), "want a refusal, got %v", err)
	require.Equal(t, fluxv1alpha2.ReasonConflict, refusal.Reason)
	require.Contains(t, err.Error(), "ConfigMap "+h.ns+"/flux-config")
	require.Equal(t, theirs.ResourceVersion, h.stored(t).ResourceVersion, "the other ConfigMap was changed")

	labelled := theirs.DeepCopy()
	labelled.Labels = map[string]string{ours: "true"}
	require.NoError(t, h.env.Client.Update(ctx, labelled))
	_, err = h.apply(t, h.configMap(map[string]any{"broker.toml": "a"}))
	require.True(t, errors.As(err, &refusal) && refusal.Reason == fluxv1alpha2.ReasonConflict, "got %v", err)
	require.Equal(t, map[string]string{"password": "s3cret"}, h.stored(t).Data)
}

// testApplyNeverWritesToAnObjectCreatedSinceItWasRead creates someone else's object of the
// name between the applier's reads, which found nothing, and its first write.
func testApplyNeverWritesToAnObjectCreatedSinceItWasRead(t *testing.T, h *harness) {
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flux-config", Namespace: h.ns, Labels: map[string]string{ours: "true"}},
		Data: map[string]string{"password": "s3cret"}}
	h.mu.Lock()
	h.beforeWrite = func() { require.NoError(t, h.env.Client.Create(ctx, theirs)) }
	h.mu.Unlock()

	m := h.mark()
	_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "a"}))
	var refusal *apply.Refusal
	require.True(t, errors.As(err, &refusal), "want a refusal, got %v", err)
	require.Equal(t, fluxv1alpha2.ReasonConflict, refusal.Reason)
	stored := h.stored(t)
	require.Equal(t, theirs.ResourceVersion, stored.ResourceVersion, "the other ConfigMap was written to")
	require.Equal(t, map[string]string{"password": "s3cret"}, stored.Data)
	require.Empty(t, stored.OwnerReferences)
	for _, r := range h.since(m) {
		require.NotContains(t, r, "PATCH", "the applier patched an object it did not create")
	}
}

// testApplyCreatedObjectsAreApplied checks that what a create set is the field owner's as an
// apply's: a field dropped later is dropped from the object.
func testApplyCreatedObjectsAreApplied(t *testing.T, h *harness) {
	_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "a", "old": "x"}))
	require.NoError(t, err)
	var managers []string
	for _, f := range h.stored(t).ManagedFields {
		managers = append(managers, f.Manager+"/"+string(f.Operation))
	}
	require.Equal(t, []string{"fluxfed-test/Update"}, managers, "a create costs one request: its claim is turned when a change needs it")

	// The first apply that changes the object claims the create's fields as applied first, so a
	// key the desired state dropped is dropped.
	require.Eventually(t, func() bool {
		_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "b"}))
		require.NoError(t, err)
		_, found := h.stored(t).Data["old"]
		return !found
	}, 10*time.Second, 20*time.Millisecond, "a key of the create stayed after it was dropped")
	managers = nil
	for _, f := range h.stored(t).ManagedFields {
		managers = append(managers, f.Manager+"/"+string(f.Operation))
	}
	require.Equal(t, []string{"fluxfed-test/Apply"}, managers)
	require.Equal(t, map[string]string{"broker.toml": "b"}, h.stored(t).Data)

	// One created under the field owner by someone else (an older fluxfed, say) is claimed
	// before the next apply too.
	cm := h.stored(t)
	require.NoError(t, h.env.Client.Delete(context.Background(), cm))
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, Labels: cm.Labels,
		OwnerReferences: cm.OwnerReferences}, Data: map[string]string{"broker.toml": "b", "old": "x"}}
	require.NoError(t, h.env.Client.Create(context.Background(), created, client.FieldOwner("fluxfed-test")))
	require.Eventually(t, func() bool {
		_, err := h.apply(t, h.configMap(map[string]any{"broker.toml": "c"}))
		require.NoError(t, err)
		_, found := h.stored(t).Data["old"]
		return !found && h.stored(t).Data["broker.toml"] == "c"
	}, 10*time.Second, 20*time.Millisecond, "a key of the create stayed after it was dropped")
}

func testApplyRefusalsCarryTheirReason(t *testing.T, h *harness) {
	job := func(image string) *unstructured.Unstructured {
		j := &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: "brokers", Namespace: h.ns, Labels: map[string]string{ours: "true"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "flux", Image: image}},
			}}},
		}
		j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(h.owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
		delete(u.Object, "status")
		return u
	}
	_, err := h.apply(t, job("rockylinux:9"))
	require.NoError(t, err)

	var refusal *apply.Refusal
	_, err = h.apply(t, job("rockylinux:10"))
	require.True(t, errors.As(err, &refusal), "got %v", err)
	require.Equal(t, fluxv1alpha2.ReasonImmutableFieldChanged, refusal.Reason)
	require.True(t, apierrors.IsInvalid(err), "the API server's error stays reachable")

	invalid := h.configMap(map[string]any{"bad key!": "x"})
	invalid.SetName("other")
	_, err = h.apply(t, invalid)
	require.True(t, errors.As(err, &refusal), "got %v", err)
	require.Equal(t, fluxv1alpha2.ReasonApplyFailed, refusal.Reason)
	require.Contains(t, refusal.Message, "bad key!")
}

func TestHolds(t *testing.T) {
	tests := []struct {
		name              string
		observed, desired any
		want              bool
	}{
		{name: "equal strings", observed: "a", desired: "a", want: true},
		{name: "different strings", observed: "a", desired: "b"},
		{name: "int64 and float64", observed: int64(3), desired: float64(3), want: true},
		{name: "different numbers", observed: int64(3), desired: float64(4)},
		{name: "a number against a string", observed: "3", desired: float64(3)},
		{name: "quantities written two ways", observed: "1", desired: "1000m", want: true},
		{name: "different quantities", observed: "1", desired: "500m"},
		{name: "false dropped by the server", observed: nil, desired: false, want: true},
		{name: "zero dropped by the server", observed: nil, desired: float64(0), want: true},
		{name: "empty map dropped", observed: nil, desired: map[string]any{}, want: true},
		{name: "empty list dropped", observed: nil, desired: []any{}, want: true},
		{name: "zero desired, something observed", observed: "x", desired: ""},
		{name: "true desired, missing", observed: nil, desired: true},
		{name: "extra observed keys", observed: map[string]any{"a": "1", "b": "2"}, desired: map[string]any{"a": "1"}, want: true},
		{name: "missing desired key", observed: map[string]any{"b": "2"}, desired: map[string]any{"a": "1"}},
		{name: "nested defaults", observed: map[string]any{"c": map[string]any{"image": "x", "terminationMessagePath": "/dev/termination-log"}},
			desired: map[string]any{"c": map[string]any{"image": "x"}}, want: true},
		{name: "lists element by element", observed: []any{map[string]any{"name": "a", "x": "1"}, map[string]any{"name": "b"}},
			desired: []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}, want: true},
		{name: "a list that grew", observed: []any{"a", "b"}, desired: []any{"a"}},
		{name: "a list that shrank", observed: []any{"a"}, desired: []any{"a", "b"}},
		{name: "reordered list", observed: []any{"b", "a"}, desired: []any{"a", "b"}},
		{name: "a map against a list", observed: []any{"a"}, desired: map[string]any{"a": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, apply.Holds(tt.observed, tt.desired))
		})
	}
}

func TestUpToDate(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
	desired.SetName("x")
	require.NoError(t, apply.Stamp(desired))
	observed := func(change func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: desired.GetAnnotations()}, Data: map[string]string{"k": "v", "other": "o"}}
		if change != nil {
			change(cm)
		}
		return cm
	}
	require.True(t, apply.UpToDate(observed(nil), desired))
	require.False(t, apply.UpToDate(observed(func(cm *corev1.ConfigMap) { cm.Data["k"] = "edited" }), desired), "an edited value")
	require.False(t, apply.UpToDate(observed(func(cm *corev1.ConfigMap) { cm.Annotations = nil }), desired), "no hash")
	require.False(t, apply.UpToDate(observed(func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = ptr.To(metav1.Now()) }), desired), "being deleted")

	// Stamping is idempotent: a stamped object stamped again keeps its hash.
	again := desired.DeepCopy()
	require.NoError(t, apply.Stamp(again))
	require.Equal(t, desired.GetAnnotations(), again.GetAnnotations())
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// staleReader is a client whose reads return what it held before: a cache that has not caught up.
type staleReader struct {
	client.Client
	held client.Object
}

func (s staleReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key != client.ObjectKeyFromObject(s.held) {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(mustUnstructured(s.held), obj)
}

func mustUnstructured(obj client.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return u
}

func testApplyLandsOnlyOnTheObjectItObserved(t *testing.T, h *harness) {
	ctx := context.Background()
	desired := h.configMap(map[string]any{"broker.toml": "ours"})
	obj, err := h.apply(t, desired)
	require.NoError(t, err)
	ours := obj.DeepCopyObject().(client.Object)

	// Someone deletes it and creates their own of the same name; the applier's cache still
	// shows ours.
	require.NoError(t, h.env.Client.Delete(ctx, ours))
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ours.GetName(), Namespace: h.ns}, Data: map[string]string{"password": "hunter2"}}
	require.NoError(t, h.env.Client.Create(ctx, theirs))
	stale := *h.applier
	stale.Client = staleReader{Client: h.applier.Client, held: ours}
	changed := h.configMap(map[string]any{"broker.toml": "changed"})
	_, err = stale.Apply(ctx, changed, apply.ControlledBy(h.owner))
	require.Error(t, err, "the apply did not land on their object")
	var refusal *apply.Refusal
	require.False(t, errors.As(err, &refusal), "a replaced object is retried, not a refusal: %v", err)
	// Which request the API server refuses depends on whether the object observed was created or
	// applied last: the claim of a created object names its resource version, an apply its UID.
	require.Regexp(t, "deleted and created again since it was read|changed since it was read", err.Error())

	got := &corev1.ConfigMap{}
	require.NoError(t, h.env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), got))
	require.Equal(t, map[string]string{"password": "hunter2"}, got.Data)
	require.Empty(t, got.OwnerReferences)
}

// testApplyTakesTypedObjects applies the same ConfigMap as an unstructured object, a typed object
// without apiVersion and kind, and an apply configuration: each is the same request, so after the
// first nothing is sent.
func testApplyTakesTypedObjects(t *testing.T, h *harness) {
	desired := h.configMap(map[string]any{"a": "1"})
	h.settled(t, desired)

	typed := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: desired.GetName(), Namespace: h.ns, Labels: desired.GetLabels(),
			OwnerReferences: desired.GetOwnerReferences(), CreationTimestamp: metav1.Now()},
		Data: map[string]string{"a": "1"},
	}
	mark := h.mark()
	got, err := h.applier.Apply(context.Background(), typed, apply.ControlledBy(h.owner))
	require.NoError(t, err)
	require.Empty(t, h.since(mark), "the typed object is the request that was applied")
	require.Equal(t, "1", got.(*corev1.ConfigMap).Data["a"])

	ref := desired.GetOwnerReferences()[0]
	config := corev1ac.ConfigMap(desired.GetName(), h.ns).WithLabels(desired.GetLabels()).WithData(map[string]string{"a": "2"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(ref.APIVersion).WithKind(ref.Kind).WithName(ref.Name).
			WithUID(ref.UID).WithController(true).WithBlockOwnerDeletion(true))
	got, err = h.applier.Apply(context.Background(), config, apply.ControlledBy(h.owner))
	require.NoError(t, err)
	require.Equal(t, "2", got.(*corev1.ConfigMap).Data["a"])

	request, err := apply.Request(typed)
	require.NoError(t, err)
	_, hasStatus := request.Object["status"]
	_, hasCreated, _ := unstructured.NestedFieldNoCopy(request.Object, "metadata", "creationTimestamp")
	require.False(t, hasStatus || hasCreated, "a client never sends status or the creation timestamp: %v", request.Object)
}
