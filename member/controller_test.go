package member

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/curve"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// requestCounter counts the API requests the manager sends, by method, so tests can assert that
// an unchanged MiniCluster costs no write.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	paths  []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		method := req.Method
		if req.URL.Query().Get("watch") == "true" {
			method = "WATCH"
		}
		c.counts[method]++
		c.paths = append(c.paths, method+" "+req.URL.Path)
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestsSince returns every request made after mark, watches included.
func (c *requestCounter) requestsSince(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths[mark:]...)
}

// writesSince returns the write requests (anything but GET and WATCH) made after mark.
func (c *requestCounter) writesSince(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.paths[mark:] {
		if !strings.HasPrefix(p, "GET ") && !strings.HasPrefix(p, "WATCH ") {
			out = append(out, p)
		}
	}
	return out
}

// readsSince returns the GET requests made after mark.
func (c *requestCounter) readsSince(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.paths[mark:] {
		if strings.HasPrefix(p, "GET ") {
			out = append(out, p)
		}
	}
	return out
}

func (c *requestCounter) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.paths)
}

type harness struct {
	env      *testenv.Env
	c        client.Client
	requests *requestCounter
}

// startManager runs the MiniCluster reconciler against a fresh API server, with the client
// limits fluxfed manager uses by default. There is no kube-controller-manager: Jobs create no
// pods, and tests write Job status themselves.
func startManager(t testing.TB) *harness {
	t.Helper()
	h := startAPIServer(t)
	h.runManager(t)
	return h
}

// startAPIServer starts an API server without the reconciler.
func startAPIServer(t testing.TB) *harness {
	t.Helper()
	env := testenv.Start(t)
	return &harness{env: env, c: env.Client, requests: &requestCounter{}}
}

// runManager starts the reconciler; it stops when the test ends.
func (h *harness) runManager(t testing.TB) {
	t.Helper()
	h.runManagerWith(t, Options{})
}

// runManagerWith starts the reconciler with opts; it stops when the test ends.
func (h *harness) runManagerWith(t testing.TB, opts Options) {
	t.Helper()
	cfg := rest.CopyConfig(h.env.Config)
	cfg.QPS, cfg.Burst = DefaultAPIQPS, DefaultAPIBurst
	cfg.Wrap(h.requests.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 h.env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: CacheByObject()},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	require.NoError(t, Setup(mgr, opts))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("the manager did not stop: %v; still running:\n%s", err, testenv.Goroutines())
		}
	})
}

func (h *harness) namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "member-"}}
	require.NoError(t, h.c.Create(context.Background(), ns))
	return ns.Name
}

func (h *harness) get(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, h.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
}

// waitCondition waits until the MiniCluster has the condition with the status and reason.
func (h *harness) waitCondition(t *testing.T, mc *fluxv1alpha2.MiniCluster, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, h.c.Get(context.Background(), client.ObjectKeyFromObject(mc), got))
		cond := meta.FindStatusCondition(got.Status.Conditions, condType)
		require.NotNil(c, cond, "condition %s", condType)
		require.Equal(c, status, cond.Status, "%s: %s", condType, cond.Message)
		require.Equal(c, reason, cond.Reason, "%s: %s", condType, cond.Message)
		require.Equal(c, got.Generation, cond.ObservedGeneration)
	}, 20*time.Second, 50*time.Millisecond)
}

func TestReconcileCreatesAnOwnedFluxInstance(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	mc := v1alpha2test.MiniCluster("flux-sample").Namespace(ns).Size(2).MaxSize(4).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady)
	h.get(t, mc)

	objects := []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: ns}},
		// No spec.network.headlessName: the Service is named after the MiniCluster.
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "flux-sample", Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.ConfigMapName(mc), Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.EntrypointConfigMapName(mc), Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(mc), Namespace: ns}},
	}
	for _, obj := range objects {
		h.get(t, obj)
		owner := metav1.GetControllerOf(obj)
		require.NotNil(t, owner, "%T %s has no controller", obj, obj.GetName())
		require.Equal(t, mc.UID, owner.UID, "%T %s", obj, obj.GetName())
		require.Equal(t, mc.Name, obj.GetLabels()[fluxv1alpha2.LabelMiniCluster], "%T %s", obj, obj.GetName())
	}

	job := objects[0].(*batchv1.Job)
	require.Equal(t, int32(2), *job.Spec.Parallelism)
	require.Equal(t, int32(2), *job.Spec.Completions)
	require.Equal(t, "flux-sample", job.Spec.Template.Spec.Subdomain)

	flux := objects[2].(*corev1.ConfigMap)
	require.Equal(t, "flux-sample-[0-3]", flux.Data[names.KeyHostlist])
	require.Contains(t, flux.Data[names.KeyBrokerTOML], "default_port = 8050")
	require.Contains(t, flux.Data[names.KeyBrokerTOML], "%h.flux-sample."+ns+".svc.cluster.local")
	for key, value := range objects[3].(*corev1.ConfigMap).Data {
		require.NotContains(t, value, "secret-key", "entrypoint script %s", key)
	}
	require.NotContains(t, flux.Data[names.KeyBrokerTOML], "secret-key")
	require.Contains(t, string(objects[4].(*corev1.Secret).Data[names.KeyCurveCert]), "secret-key")

	require.Equal(t, int32(2), mc.Status.Size)
	require.Equal(t, int32(4), mc.Status.MaximumSize)
	require.Equal(t, "batch.kubernetes.io/job-name=flux-sample,fluxfed.io/minicluster=flux-sample", mc.Status.Selector)
	require.Equal(t, "flux-sample-[0-3]", mc.Status.Hostlist)
	require.Equal(t, mc.Generation, mc.Status.ObservedGeneration)
}

// settle waits until the MiniCluster's status reflects its generation and no write happened for
// a while, so the next step starts from rest.
func (h *harness) settle(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, h.c.Get(context.Background(), client.ObjectKeyFromObject(mc), got))
		require.Equal(c, got.Generation, got.Status.ObservedGeneration)
	}, 20*time.Second, 50*time.Millisecond)
	for {
		mark := h.requests.mark()
		time.Sleep(500 * time.Millisecond)
		if len(h.requests.writesSince(mark)) == 0 {
			return
		}
	}
}

func TestReconcileOfAnUnchangedMiniClusterWritesNothing(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("idle").Namespace(h.namespace(t)).Size(3).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.settle(t, mc)

	// An annotation changes the object (so the reconciler runs) but not what it renders.
	mark := h.requests.mark()
	h.get(t, mc)
	mc.Annotations = map[string]string{"example.com/touched": "yes"}
	require.NoError(t, h.c.Update(ctx, mc))
	time.Sleep(2 * time.Second)
	require.Empty(t, h.requests.writesSince(mark), "a reconcile of an unchanged MiniCluster must not write")
	require.Empty(t, h.requests.readsSince(mark), "a reconcile of an unchanged MiniCluster reads its cache only")
}

func TestStatusFollowsTheJob(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("tracked").Namespace(h.namespace(t)).Size(2).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady)

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: mc.Namespace}}
	setJobStatus := func(mutate func(*batchv1.JobStatus)) {
		t.Helper()
		h.get(t, job)
		mutate(&job.Status)
		require.NoError(t, h.c.Status().Update(ctx, job))
	}

	// The pods come up (kube-controller-manager would report this).
	now := metav1.Now()
	setJobStatus(func(s *batchv1.JobStatus) {
		s.StartTime = &now
		s.Active = 2
		s.Ready = ptr.To(int32(2))
	})
	h.waitCondition(t, mc, fluxv1alpha2.ConditionReady, metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady)
	h.get(t, mc)
	require.Equal(t, int32(2), mc.Status.Ready)

	// The lead broker finishes: the Job completes.
	setJobStatus(func(s *batchv1.JobStatus) {
		s.Active, s.Ready, s.Succeeded = 0, ptr.To(int32(0)), 2
		s.CompletedIndexes = "0-1"
		s.CompletionTime = &now
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	})
	h.waitCondition(t, mc, fluxv1alpha2.ConditionComplete, metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete)
	h.waitCondition(t, mc, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonJobComplete)

	// One event per transition, not one per reconcile.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, map[string]int{fluxv1alpha2.ReasonPodsReady: 1, fluxv1alpha2.ReasonJobComplete: 2}, h.eventReasons(c, mc))
	}, 10*time.Second, 100*time.Millisecond)
}

// eventReasons counts the events recorded on mc by reason.
func (h *harness) eventReasons(c require.TestingT, mc *fluxv1alpha2.MiniCluster) map[string]int {
	reasons := map[string]int{}
	for _, e := range h.events(c, mc) {
		reasons[e.Reason]++
	}
	return reasons
}

// events returns the events recorded on mc.
func (h *harness) events(c require.TestingT, mc *fluxv1alpha2.MiniCluster) []eventsv1.Event {
	var list eventsv1.EventList
	require.NoError(c, h.c.List(context.Background(), &list, client.InNamespace(mc.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == mc.Name && e.Regarding.Kind == "MiniCluster" {
			out = append(out, e)
		}
	}
	return out
}

// TestScalingWithinMaxSizeRestartsNothing scales a MiniCluster that reserved its ranks with
// maxSize: the Job stays the same, with the same pod template, and only its parallelism and
// completions change; the brokers' configuration stays as it is.
func TestScalingWithinMaxSizeRestartsNothing(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("elastic").Namespace(h.namespace(t)).Size(2).MaxSize(5).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.settle(t, mc)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: mc.Namespace}}
	h.get(t, job)
	before := job.DeepCopy()
	// broker.toml and the hostlist hold maxSize hosts already. (The entrypoint ConfigMap does
	// change: the broker quorum of a lead broker that starts later follows spec.size.)
	flux := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.ConfigMapName(mc), Namespace: mc.Namespace}}
	h.get(t, flux)
	fluxVersion := flux.ResourceVersion

	for _, size := range []int32{4, 1, 5} {
		h.get(t, mc)
		mc.Spec.Size = size
		require.NoError(t, h.c.Update(ctx, mc))
		h.settle(t, mc)
		h.get(t, job)
		require.Equal(t, size, *job.Spec.Parallelism, "parallelism")
		require.Equal(t, size, *job.Spec.Completions, "completions")
		require.Equal(t, before.UID, job.UID, "the Job is the same: running brokers are not restarted")
		require.Equal(t, before.Spec.Template, job.Spec.Template, "the pod template is unchanged")
		h.get(t, flux)
		require.Equal(t, fluxVersion, flux.ResourceVersion, "the brokers' configuration changed")
		h.get(t, mc)
		require.Equal(t, size, mc.Status.Size)
		require.Equal(t, "elastic-[0-4]", mc.Status.Hostlist)
		failed := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed)
		require.Equal(t, metav1.ConditionFalse, failed.Status, failed.Message)
	}

	// The scale subresource drives the same path: kubectl scale mc/elastic --replicas=3.
	h.get(t, mc)
	scale := &autoscalingv1.Scale{}
	require.NoError(t, h.c.SubResource("scale").Get(ctx, mc, scale))
	scale.Spec.Replicas = 3
	require.NoError(t, h.c.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(job), job))
		require.Equal(c, int32(3), *job.Spec.Parallelism)
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, before.UID, job.UID)
	require.Equal(t, before.Spec.Template, job.Spec.Template)
}

func TestAChangeTheJobCannotTakeIsReportedNotRetried(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("frozen").Namespace(h.namespace(t)).Size(2).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.settle(t, mc)

	h.get(t, mc)
	mc.Spec.Containers[0].Image = "rockylinux:10"
	require.NoError(t, h.c.Update(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonImmutableFieldChanged)
	h.get(t, mc)
	require.Contains(t, meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed).Message, "Job "+mc.Namespace+"/frozen")

	// A reconcile already under way when the condition was read may still send its one attempt
	// (a busy machine); wait until a second passes without a write, for at most 30 s: a change
	// retried in a loop never lets it.
	require.Eventually(t, func() bool {
		quiet := h.requests.mark()
		time.Sleep(time.Second)
		return len(h.requests.writesSince(quiet)) == 0
	}, 30*time.Second, time.Millisecond, "the refused change is still being retried")
	mark := h.requests.mark()
	time.Sleep(3 * time.Second)
	require.Empty(t, h.requests.writesSince(mark), "a refused change must not be retried in a loop")
}

// TestMiniClustersOfANamespaceHaveAServiceEach checks that MiniClusters without
// spec.network.headlessName do not share a Service, and that one that names another's Service
// is refused without touching it.
func TestMiniClustersOfANamespaceHaveAServiceEach(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	first := v1alpha2test.MiniCluster("first").Namespace(ns).Obj()
	second := v1alpha2test.MiniCluster("second").Namespace(ns).Obj()
	require.NoError(t, h.c.Create(ctx, first))
	require.NoError(t, h.c.Create(ctx, second))
	for _, mc := range []*fluxv1alpha2.MiniCluster{first, second} {
		h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: ns}}
		h.get(t, svc)
		h.get(t, mc)
		require.Equal(t, mc.UID, metav1.GetControllerOf(svc).UID)
		require.Equal(t, names.SelectorLabels(mc), svc.Spec.Selector, "each Service resolves its own MiniCluster's pods")
	}

	// A third names the first one's Service.
	third := v1alpha2test.MiniCluster("third").Namespace(ns).HeadlessName("first").Obj()
	require.NoError(t, h.c.Create(ctx, third))
	h.waitCondition(t, third, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonConflict)
	h.get(t, third)
	message := meta.FindStatusCondition(third.Status.Conditions, fluxv1alpha2.ConditionFailed).Message
	require.Contains(t, message, "Service "+ns+"/first")
	require.Contains(t, message, "spec.network.headlessName")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns}}
	h.get(t, svc)
	require.Equal(t, first.UID, metav1.GetControllerOf(svc).UID, "the first one's Service is left alone")
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.JobName(third)}, &batchv1.Job{})),
		"no broker starts without its Service")

	// Unset, the name is its own.
	third.Spec.Network.HeadlessName = ""
	require.NoError(t, h.c.Update(ctx, third))
	h.waitCondition(t, third, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
	h.get(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "third", Namespace: ns}})
}

// TestMiniClustersCreatedInBulkWaitForItsEnd checks that MiniClusters created in bulk wait for
// the bulk to end (bulk.go), while the first few, and any change, are reconciled at once.
func TestMiniClustersCreatedInBulkWaitForItsEnd(t *testing.T) {
	h := startAPIServer(t)
	// A bulk lasts an hour here: what waits, waits.
	h.runManagerWith(t, Options{BulkWindow: time.Hour, BulkHoldMax: time.Hour})
	ctx := context.Background()
	ns := h.namespace(t)
	var mcs []*fluxv1alpha2.MiniCluster
	for i := range BulkCount + 1 {
		mc := v1alpha2test.MiniCluster(fmt.Sprintf("bulk-%d", i)).Namespace(ns).Obj()
		require.NoError(t, h.c.Create(ctx, mc))
		mcs = append(mcs, mc)
	}
	for _, mc := range mcs[:BulkCount-1] {
		h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
	}

	// A change is reconciled at once, even of a MiniCluster that waits.
	held, last := mcs[BulkCount-1], mcs[BulkCount]
	patch := client.MergeFrom(held.DeepCopy())
	held.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, h.c.Patch(ctx, held, patch))
	h.waitCondition(t, held, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)

	// The last one, created before that change was made, still waits: nothing of it was
	// written.
	h.get(t, last)
	require.Empty(t, last.Status.Conditions, "the last MiniCluster of the bulk was reconciled before the bulk ended")
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.JobName(last)}, &batchv1.Job{})),
		"the last MiniCluster of the bulk has a Job before the bulk ended")
}

// TestMiniClustersCreatedInBulkAreAllRendered checks, with the default window, that MiniClusters
// created in bulk are all rendered once the bulk ends.
func TestMiniClustersCreatedInBulkAreAllRendered(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	var mcs []*fluxv1alpha2.MiniCluster
	for i := range 3 * BulkCount {
		mc := v1alpha2test.MiniCluster(fmt.Sprintf("bulk-%d", i)).Namespace(ns).Obj()
		require.NoError(t, h.c.Create(ctx, mc))
		mcs = append(mcs, mc)
	}
	for _, mc := range mcs {
		h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
		h.get(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: ns}})
	}
}

func TestCleanupDeletesTheFinishedPods(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("tidy").Namespace(h.namespace(t)).Size(2).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Cleanup = true }).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.settle(t, mc)

	// Stand-ins for the Job's finished pods (no kube-controller-manager runs here), and a pod of
	// someone else that must survive.
	for _, name := range []string{"tidy-0", "tidy-1", "unrelated"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mc.Namespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if name != "unrelated" {
			pod.Labels = names.SelectorLabels(mc)
		}
		require.NoError(t, h.c.Create(ctx, pod))
	}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: mc.Namespace}}
	h.get(t, job)
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 2, CompletedIndexes: "0-1", Ready: ptr.To(int32(0)),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	require.NoError(t, h.c.Status().Update(ctx, job))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionComplete, metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var pods corev1.PodList
		require.NoError(c, h.c.List(ctx, &pods, client.InNamespace(mc.Namespace)))
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		require.Equal(c, []string{"unrelated"}, names)
	}, 10*time.Second, 100*time.Millisecond)
	h.get(t, job)
	require.Nil(t, job.DeletionTimestamp, "the completed Job stays, so its record does")
}

func TestASpecThatCannotBeRenderedIsReported(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	// kary:2 puts burst-0's second broker (rank 3) under rank 1, a root broker it cannot reach.
	mc := v1alpha2test.MiniCluster("crooked").Namespace(h.namespace(t)).Size(2).Burst("burst-0", 4, "").
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Flux.Topology = "kary:2" }).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonInvalidSpec)
	h.get(t, mc)
	require.Contains(t, meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed).Message, "spec.flux.topology")

	var jobs batchv1.JobList
	require.NoError(t, h.c.List(ctx, &jobs, client.InNamespace(mc.Namespace)))
	require.Empty(t, jobs.Items, "nothing is started for a spec that cannot work")
}

// TestALongFailureMessageStillGetsItsEvent gives the MiniCluster a spec error whose message is
// longer than an event's note may be: the condition keeps the whole message, the event gets the
// message cut to 1024 bytes instead of being refused by the events API.
func TestALongFailureMessageStillGetsItsEvent(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	// An unterminated quote in commands.prefix; the error quotes the prefix, all 3000 bytes.
	prefix := "'" + strings.Repeat("é", 1500)
	mc := v1alpha2test.MiniCluster("long-failure").Namespace(h.namespace(t)).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Containers[0].Commands.Prefix = prefix }).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonInvalidSpec)
	h.get(t, mc)
	message := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed).Message
	require.Contains(t, message, strings.Repeat("é", 1500), "the condition keeps the whole message")

	var note string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, e := range h.events(c, mc) {
			if e.Reason == fluxv1alpha2.ReasonInvalidSpec {
				note = e.Note
				return
			}
		}
		c.Errorf("no %s event", fluxv1alpha2.ReasonInvalidSpec)
	}, 10*time.Second, 50*time.Millisecond)
	require.LessOrEqual(t, len(note), 1024)
	require.True(t, utf8.ValidString(note), "the note is cut on a rune boundary")
	require.True(t, strings.HasSuffix(note, "..."), "the note says it was cut: %q", note)
	require.True(t, strings.HasPrefix("Failed=True: "+message, strings.TrimSuffix(note, "...")), "the note is the start of the message: %q", note)
}

// TestDeletingTheMiniClusterLeavesNothingBehind runs Kubernetes' garbage collector next to the
// reconciler: everything the MiniCluster made must go with it, through owner references alone.
func TestDeletingTheMiniClusterLeavesNothingBehind(t *testing.T) {
	h := startManager(t)
	h.env.RunControllers(t, "garbagecollector")
	ctx := context.Background()
	ns := h.namespace(t)
	mc := v1alpha2test.MiniCluster("ephemeral").Namespace(ns).Size(2).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Services = []fluxv1alpha2.Container{{Name: "registry", Image: "registry:2"}}
		}).Obj()
	require.NoError(t, h.c.Create(ctx, mc))
	h.settle(t, mc)

	count := func(c require.TestingT) int {
		n := 0
		lists := []client.ObjectList{&batchv1.JobList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}}
		for _, list := range lists {
			require.NoError(c, h.c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(names.SelectorLabels(mc))))
			n += meta.LenList(list)
		}
		return n
	}
	// Broker Job, services Job, headless Service, two ConfigMaps, the curve Secret.
	require.Equal(t, 6, count(t))

	require.NoError(t, h.c.Delete(ctx, mc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Zero(c, count(c))
	}, 60*time.Second, 200*time.Millisecond)
}

// TestAMiniClusterCreatedAgainWaitsForWhatTheEarlierOneLeft deletes a MiniCluster and creates
// one of the same name before the garbage collector has deleted the first one's objects: the new
// one waits for them to go, without failing and without a Conflict, then makes its own.
func TestAMiniClusterCreatedAgainWaitsForWhatTheEarlierOneLeft(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	first := v1alpha2test.MiniCluster("again").Namespace(ns).Size(2).Obj()
	require.NoError(t, h.c.Create(ctx, first))
	h.settle(t, first)
	require.NoError(t, h.c.Delete(ctx, first))

	second := v1alpha2test.MiniCluster("again").Namespace(ns).Size(2).Obj()
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.NoError(c, h.c.Create(ctx, second)) }, 10*time.Second, 50*time.Millisecond)
	h.waitCondition(t, second, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonEarlierObjectsPending)
	h.get(t, second)
	ready := meta.FindStatusCondition(second.Status.Conditions, fluxv1alpha2.ConditionReady)
	require.Contains(t, ready.Message, "was left by an earlier MiniCluster of this name (uid "+string(first.UID)+")")
	require.False(t, meta.IsStatusConditionTrue(second.Status.Conditions, fluxv1alpha2.ConditionFailed), "nothing failed")

	// The garbage collector deletes the earlier one's objects; the new one makes its own.
	h.env.RunControllers(t, "garbagecollector")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := 0
		for _, list := range []client.ObjectList{&batchv1.JobList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}} {
			require.NoError(c, h.c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(names.SelectorLabels(second))))
			require.NoError(c, meta.EachListItem(list, func(o runtime.Object) error {
				obj := o.(client.Object)
				require.Equal(c, second.UID, metav1.GetControllerOf(obj).UID, "%T %s is the new MiniCluster's", obj, obj.GetName())
				n++
				return nil
			}))
		}
		require.Equal(c, 5, n, "the broker Job, the headless Service, two ConfigMaps and the CURVE Secret")
	}, 60*time.Second, 200*time.Millisecond)
	h.waitCondition(t, second, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
}

func TestASecretOfSomeoneElseIsNotTakenForTheCertificate(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	mc := v1alpha2test.MiniCluster("squatted").Namespace(ns).Obj()
	// Not labelled, so outside the reconciler's cache: only the API server knows it exists.
	squatter := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(mc), Namespace: ns},
		StringData: map[string]string{"password": "hunter2"},
	}
	require.NoError(t, h.c.Create(ctx, squatter))
	require.NoError(t, h.c.Create(ctx, mc))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonConflict)
	h.get(t, mc)
	require.Contains(t, meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed).Message,
		"Secret "+ns+"/squatted-curve: exists and does not belong to this MiniCluster")
	h.get(t, squatter)
	require.Equal(t, "hunter2", string(squatter.Data["password"]), "the other Secret is left alone")
	require.Empty(t, squatter.Labels)

	// A conflict is retried: once the other Secret is gone, the MiniCluster gets its own.
	require.NoError(t, h.c.Delete(ctx, squatter))
	h.waitCondition(t, mc, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(mc), Namespace: ns}}
	h.get(t, secret)
	h.get(t, mc)
	require.Equal(t, mc.UID, metav1.GetControllerOf(secret).UID)
}

func TestAChildWaitsForTheCertificateTheHubPushes(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	ns := h.namespace(t)
	originLabels := map[string]string{
		fluxv1alpha2.LabelMiniCluster:     "burst-a",
		fluxv1alpha2.LabelOriginHub:       "hub-1",
		fluxv1alpha2.LabelOriginNamespace: "research",
		fluxv1alpha2.LabelOriginName:      "root",
	}
	origin := func(obj metav1.Object, rootUID string) {
		obj.SetLabels(maps.Clone(originLabels))
		obj.SetAnnotations(map[string]string{fluxv1alpha2.AnnotationOriginUID: rootUID})
	}
	child := v1alpha2test.MiniCluster("burst-a").Namespace(ns).Size(2).Labels(originLabels).Burst("burst-a", 2, "").
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Name: "root", Address: "127.0.0.1", Port: 30050, Size: 2}
		}).Obj()
	child.Annotations = map[string]string{fluxv1alpha2.AnnotationOriginUID: "root-uid"}
	require.NoError(t, h.c.Create(ctx, child))

	// No Secret yet: the child waits and generates nothing of its own.
	h.waitCondition(t, child, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonCurveSecretPending)
	h.get(t, child)
	require.True(t, meta.IsStatusConditionFalse(child.Status.Conditions, fluxv1alpha2.ConditionFailed), "waiting is not failing")
	secret := &corev1.Secret{}
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.CurveSecretName(child)}, secret)))
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.JobName(child)}, &batchv1.Job{})))

	// A Secret the hub pushed for another root is not taken.
	cert, err := curve.Generate(rand.Reader)
	require.NoError(t, err)
	stranger := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(child), Namespace: ns},
		Data:       map[string][]byte{names.KeyCurveCert: curve.File(cert)},
	}
	origin(stranger, "another-root-uid")
	require.NoError(t, h.c.Create(ctx, stranger))
	h.waitCondition(t, child, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonConflict)
	require.NoError(t, h.c.Delete(ctx, stranger))

	// Nor one that carries this root's labels and origin but not the reference to the child
	// that the hub puts on what it pushes: labels prove nothing. No broker starts with it.
	h.waitCondition(t, child, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonCurveSecretPending)
	forged := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(child), Namespace: ns},
		Data:       map[string][]byte{names.KeyCurveCert: curve.File(cert)},
	}
	origin(forged, "root-uid")
	require.NoError(t, h.c.Create(ctx, forged))
	h.waitCondition(t, child, fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonConflict)
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.JobName(child)}, &batchv1.Job{})))
	require.NoError(t, h.c.Delete(ctx, forged))

	// The root's Secret arrives: the brokers start with it, unchanged.
	push := func() *corev1.Secret {
		t.Helper()
		pushed := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(child), Namespace: ns},
			Data:       map[string][]byte{names.KeyCurveCert: curve.File(cert)},
		}
		origin(pushed, "root-uid")
		pushed.OwnerReferences = []metav1.OwnerReference{{APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster",
			Name: child.Name, UID: child.UID, Controller: ptr.To(true)}}
		require.NoError(t, h.c.Create(ctx, pushed))
		return pushed
	}
	pushed := push()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.JobName(child)}, &batchv1.Job{}))
	}, 30*time.Second, 100*time.Millisecond, "the brokers never started with the pushed Secret")
	h.waitCondition(t, child, fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning)
	require.NoError(t, h.c.Get(ctx, client.ObjectKeyFromObject(pushed), secret))
	require.Equal(t, curve.File(cert), secret.Data[names.KeyCurveCert], "the pushed certificate is used as it is")

	// Deleted, it is not replaced by one of the child's own: the child waits for the hub again.
	require.NoError(t, h.c.Delete(ctx, pushed))
	h.waitCondition(t, child, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonCurveSecretPending)
	require.True(t, apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKeyFromObject(pushed), secret)))
	push()
	h.waitCondition(t, child, fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady)
}

// TestDriftIsCorrected changes or deletes, by hand, each kind of object the reconciler owns, and
// waits for the reconciler to put it back. Nothing polls: the watches bring the MiniCluster back.
func TestDriftIsCorrected(t *testing.T) {
	h := startManager(t)
	ctx := context.Background()
	// start creates a settled MiniCluster in a namespace of its own.
	start := func(t *testing.T) *fluxv1alpha2.MiniCluster {
		t.Helper()
		mc := v1alpha2test.MiniCluster("drift").Namespace(h.namespace(t)).Size(2).MaxSize(4).Obj()
		require.NoError(t, h.c.Create(ctx, mc))
		h.settle(t, mc)
		return mc
	}
	eventually := func(t *testing.T, f func(c *assert.CollectT)) {
		t.Helper()
		require.EventuallyWithT(t, f, 20*time.Second, 50*time.Millisecond)
	}

	t.Run("an edited key of the flux ConfigMap", func(t *testing.T) {
		mc := start(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.ConfigMapName(mc), Namespace: mc.Namespace}}
		h.get(t, cm)
		want := cm.Data[names.KeyHostlist]
		cm.Data[names.KeyHostlist] = "elsewhere-[0-7]"
		require.NoError(t, h.c.Update(ctx, cm))
		eventually(t, func(c *assert.CollectT) {
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(cm), cm))
			require.Equal(c, want, cm.Data[names.KeyHostlist])
		})
	})

	t.Run("a deleted headless Service", func(t *testing.T) {
		mc := start(t)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace}}
		h.get(t, svc)
		require.NoError(t, h.c.Delete(ctx, svc))
		eventually(t, func(c *assert.CollectT) {
			again := &corev1.Service{}
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(svc), again))
			require.NotEqual(c, svc.UID, again.UID)
			require.Equal(c, mc.UID, metav1.GetControllerOf(again).UID)
			require.Equal(c, corev1.ClusterIPNone, again.Spec.ClusterIP)
		})
	})

	t.Run("the Job's parallelism changed by hand", func(t *testing.T) {
		mc := start(t)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: mc.Namespace}}
		h.get(t, job)
		job.Spec.Parallelism = ptr.To(int32(4))
		require.NoError(t, h.c.Update(ctx, job))
		eventually(t, func(c *assert.CollectT) {
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(job), job))
			require.Equal(c, int32(2), *job.Spec.Parallelism)
		})
	})

	t.Run("a label of the Job changed by hand", func(t *testing.T) {
		// Neither the Job's generation nor its spec moves: what the reconciler remembers of a
		// settled MiniCluster must still see it.
		mc := start(t)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: names.JobName(mc), Namespace: mc.Namespace}}
		h.get(t, job)
		generation := job.Generation
		job.Labels[fluxv1alpha2.LabelMiniCluster] = "elsewhere"
		require.NoError(t, h.c.Update(ctx, job))
		require.NoError(t, h.c.Get(ctx, client.ObjectKeyFromObject(job), job))
		require.Equal(t, generation, job.Generation)
		eventually(t, func(c *assert.CollectT) {
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(job), job))
			require.Equal(c, mc.Name, job.Labels[fluxv1alpha2.LabelMiniCluster])
		})
	})

	t.Run("the deleted CURVE Secret of a root", func(t *testing.T) {
		mc := start(t)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(mc), Namespace: mc.Namespace}}
		h.get(t, secret)
		require.NoError(t, h.c.Delete(ctx, secret))
		eventually(t, func(c *assert.CollectT) {
			again := &corev1.Secret{}
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(secret), again))
			require.NotEqual(c, secret.UID, again.UID)
			require.NotEqual(c, secret.Data[names.KeyCurveCert], again.Data[names.KeyCurveCert], "a new certificate")
		})
		// The user hears that the running brokers hold the old one, and what to do.
		eventually(t, func(c *assert.CollectT) {
			var regenerated []eventsv1.Event
			for _, e := range h.events(c, mc) {
				if e.Reason == fluxv1alpha2.EventCurveSecretRegenerated {
					regenerated = append(regenerated, e)
				}
			}
			require.Len(c, regenerated, 1)
			require.Equal(c, corev1.EventTypeWarning, regenerated[0].Type)
			require.Contains(c, regenerated[0].Note, "Brokers started before hold the old certificate and will not join brokers that start with the new one")
			require.Contains(c, regenerated[0].Note, "kubectl delete pods -n "+mc.Namespace+" -l fluxfed.io/minicluster=drift")
		})
	})

	t.Run("the CURVE Secret stripped of its labels", func(t *testing.T) {
		mc := start(t)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.CurveSecretName(mc), Namespace: mc.Namespace}}
		h.get(t, secret)
		stripped := secret.DeepCopy()
		stripped.Labels = nil
		require.NoError(t, h.c.Update(ctx, stripped))
		eventually(t, func(c *assert.CollectT) {
			again := &corev1.Secret{}
			require.NoError(c, h.c.Get(ctx, client.ObjectKeyFromObject(secret), again))
			require.Equal(c, names.SelectorLabels(mc), again.Labels)
			require.Equal(c, secret.UID, again.UID, "the same Secret")
			require.Equal(c, secret.Data, again.Data, "the same certificate")
		})
		require.Empty(t, h.eventReasons(t, mc)[fluxv1alpha2.EventCurveSecretRegenerated], "nothing was regenerated")
	})
}
