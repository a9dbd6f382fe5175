package managermem

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// The resources a run watches: the MiniClusters and what the operators make of them.
var (
	miniClustersResource = fluxv1alpha2.GroupVersion.WithResource("miniclusters")
	jobsResource         = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	servicesResource     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMapsResource   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	crdsResource         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// applied are the figures of a run that applies the MiniClusters with kubectl, in seconds and
// requests per MiniCluster.
type applied struct {
	// apply is how long kubectl apply ran.
	apply float64
	// all is the time from the start of kubectl apply until the last object of the last
	// MiniCluster appeared; latencies are each MiniCluster's, from its appearance to its Job's.
	all       float64
	latencies []float64
	// requests were sent by the manager until all objects existed, settled until it settled;
	// byMethod splits requests.
	requests, settled float64
	byMethod          map[string]float64
	memory            figures
}

// sideBySide runs every binary, the Flux Operator's among them, on n MiniClusters that one
// kubectl apply creates (one multi-document file, the same for every run), each on an API server
// of its own with its CRD. A run ends when every MiniCluster has its Job, headless Service and
// ConfigMaps (the Flux Operator writes no status generation), which the benchmark sees through
// watches. Before the first binary, and after the last for the other CRD, kubectl apply runs on
// a fresh API server with no manager: the baseline of the slowdown the running manager causes.
// The last sub-benchmark compares the runs of this size: it reports the ratios of fluxfed's figures
// to the Flux Operator's and logs them all in a table.
func sideBySide(b *testing.B, bins []binary, paths map[string]string, n int) {
	alone := map[string]float64{} // kubectl apply with no manager, by CRD
	results := map[string]*applied{}
	runAlone := func(crd string) {
		b.Run(fmt.Sprintf("kubectl-alone/crd=%s/mc=%d", crdName(crd), n), func(b *testing.B) {
			for range b.N {
				alone[crd] = applyAlone(b, crd, n)
			}
		})
	}
	runAlone(bins[0].crd)
	for _, bin := range bins {
		b.Run(fmt.Sprintf("%s/mc=%d", bin.name, n), func(b *testing.B) {
			for range b.N {
				results[bin.name] = applyWith(b, bin, paths[bin.name], n)
			}
		})
	}
	for _, bin := range bins {
		if _, ok := alone[bin.crd]; !ok {
			runAlone(bin.crd)
		}
	}
	b.Run(fmt.Sprintf("fluxfed-vs-fluxoperator/mc=%d", n), func(b *testing.B) {
		for range b.N {
			compare(b, bins, results, alone, n)
		}
	})
}

// crdName names the CRD of a run: fluxfed's (crd is empty) or the Flux Operator's.
func crdName(crd string) string {
	if crd == "" {
		return "fluxfed"
	}
	return "fluxoperator"
}

// startAPIServer starts the API server of a run with the MiniCluster CRD crd in place of
// fluxfed's (when crd is not empty) and the benchmark's namespace, writes the file of n
// MiniClusters and a kubeconfig into dir, and has kubectl apply the first as a dry run (its
// cache, the API server's discovery, is kept in dir), as a user's kubectl and a server that ran
// for a while have done before an apply. It returns the server and the file.
func startAPIServer(b *testing.B, crd string, n int, dir string) (*testenv.Env, string) {
	b.Helper()
	env := testenv.Start(b)
	if crd != "" {
		replaceMiniClusterCRD(b, env, crd)
	}
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	var file bytes.Buffer
	for i, mc := range miniClusters(n) {
		data, err := yaml.Marshal(mc)
		if err != nil {
			b.Fatal(err)
		}
		file.WriteString("---\n")
		file.Write(data)
		if i == 0 {
			// The first one, applied as a dry run: kubectl reads the discovery and the API
			// server builds what admitting a MiniCluster takes (the CRD's schema, its CEL
			// rules), which a server that has just started has not.
			first := filepath.Join(dir, "first.yaml")
			if err := os.WriteFile(first, data, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := kubectl(env.WriteKubeconfig(b, dir), "apply", "--dry-run=server", "-f", first); err != nil {
				b.Fatal(err)
			}
		}
	}
	path := filepath.Join(dir, "miniclusters.yaml")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return env, path
}

// replaceMiniClusterCRD deletes fluxfed's MiniCluster CRD, which testenv installed, waits until it
// is gone and installs the one in the file crd (the same group, version and kind).
func replaceMiniClusterCRD(b *testing.B, env *testenv.Env, crd string) {
	b.Helper()
	ctx := context.Background()
	mc, err := metadata.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	name := miniClustersResource.GroupResource().String()
	crds := mc.Resource(crdsResource)
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.Fatalf("deleting fluxfed's CRD %s: %v", name, err)
	}
	if err := poll(testenv.CRDTimeout, 100*time.Millisecond, func() bool {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, nil); err != nil {
		b.Fatalf("fluxfed's CRD %s is not gone: %v", name, err)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{crd}, ErrorIfPathMissing: true, MaxTime: testenv.CRDTimeout,
	}); err != nil {
		b.Fatalf("installing the CRD of %s: %v", crd, err)
	}
}

// applyAlone times kubectl apply of n MiniClusters on a fresh API server with the CRD crd and no
// manager.
func applyAlone(b *testing.B, crd string, n int) float64 {
	b.StopTimer()
	logLoad(b, "at the start")
	dir := b.TempDir()
	env, file := startAPIServer(b, crd, n, dir)
	watch(b, env) // as in a run with a manager
	stopServerCPU := profileAPIServer(b, env, fmt.Sprintf("kubectl-alone-crd=%s-mc=%d", crdName(crd), n))
	b.StartTimer()
	took := kubectlApply(filepath.Join(dir, "kubeconfig"), file)
	b.StopTimer()
	stopServerCPU()
	if took.err != nil {
		b.Fatal(took.err)
	}
	list, err := metadataClient(b, env).Resource(miniClustersResource).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(list.Items) != n {
		b.Fatalf("kubectl apply left %d MiniClusters, not %d", len(list.Items), n)
	}
	b.ReportMetric(took.seconds, "apply-s")
	b.ReportMetric(0, "ns/op") // the time that matters is apply-s, above
	logLoad(b, "at the end")
	return took.seconds
}

// took is how long kubectl apply ran, or why it failed.
type took struct {
	seconds float64
	err     error
}

// kubectlApply runs kubectl apply -f file, as a user applies a file of MiniClusters.
func kubectlApply(kubeconfig, file string) took {
	start := time.Now()
	if err := kubectl(kubeconfig, "apply", "-f", file); err != nil {
		return took{err: err}
	}
	return took{seconds: time.Since(start).Seconds()}
}

// kubectl runs kubectl with args against the API server of kubeconfig, with its cache (the API
// server's discovery) beside the kubeconfig; its error quotes the end of its output.
func kubectl(kubeconfig string, args ...string) error {
	dir, err := k8sbin.Dir("kubectl")
	if err != nil {
		return err
	}
	args = append([]string{"--kubeconfig=" + kubeconfig, "--cache-dir=" + filepath.Join(filepath.Dir(kubeconfig), "kube-cache")}, args...)
	out, err := exec.Command(filepath.Join(dir, "kubectl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w; its output ends:\n%s", strings.Join(args[2:], " "), err, tail(out, 2048))
	}
	return nil
}

// applyWith is a run of bin: its manager runs while kubectl applies n MiniClusters, until every
// one has its objects.
func applyWith(b *testing.B, bin binary, path string, n int) *applied {
	b.StopTimer()
	logLoad(b, "at the start")
	dir := b.TempDir()
	env, file := startAPIServer(b, bin.crd, n, dir)
	m := startManager(b, bin, path, env, dir)
	seen := watch(b, env)
	mcs := miniClusters(n)
	want := make([][]string, n) // each MiniCluster's objects, as resource/name
	for i, mc := range mcs {
		want[i] = objectsOf(bin, mc)
	}
	before, _ := requests(b, m.metricsAddr)

	b.StartTimer()
	t0 := time.Now()
	peakAnon := m.sampleAnon(b)
	stopCPU := m.profileCPU(b, n)
	stopServerCPU := profileAPIServer(b, env, fmt.Sprintf("%s-mc=%d", bin.name, n))
	kubectl := make(chan took, 1)
	go func() { kubectl <- kubectlApply(m.kubeconfig, file) }()
	if err := poll(*wait, 100*time.Millisecond, func() bool { return seen.all(want) }, m.exited); err != nil {
		b.Fatalf("not every one of %d MiniClusters has its Job, headless Service and ConfigMaps: %v", n, err)
	}
	b.StopTimer()
	r := &applied{all: seen.last(want).Sub(t0).Seconds()}
	total, byMethod := requests(b, m.metricsAddr)
	r.requests = (total - before) / float64(n)
	r.byMethod = map[string]float64{}
	for method, count := range byMethod {
		r.byMethod[method] = count / float64(n)
	}
	took := <-kubectl
	if took.err != nil {
		b.Fatal(took.err)
	}
	r.apply = took.seconds
	stopCPU()
	stopServerCPU()
	for i, mc := range mcs {
		created := seen.when(miniClustersResource.Resource + "/" + mc.Name)
		r.latencies = append(r.latencies, seen.when(want[i][0]).Sub(created).Seconds())
	}
	time.Sleep(*settle)
	total, _ = requests(b, m.metricsAddr)
	r.settled = (total - before) / float64(n)
	r.memory = m.figures(b, peakAnon(), n)
	r.memory.elapsed = r.all

	reportMemory(b, r.memory)
	p50, p99 := percentile(r.latencies, 50), percentile(r.latencies, 99)
	b.ReportMetric(r.all, "s")
	b.ReportMetric(r.apply, "apply-s")
	b.ReportMetric(p50, "p50-s")
	b.ReportMetric(p99, "p99-s")
	b.ReportMetric(r.requests, "requests/mc")
	b.ReportMetric(r.settled, "settled-requests/mc")
	b.ReportMetric(0, "ns/op") // the time that matters is s, above
	var methods []string
	for method, count := range r.byMethod {
		methods = append(methods, fmt.Sprintf("%s %.2f", method, count))
	}
	slices.Sort(methods)
	b.Logf("%s: requests per MiniCluster until every object existed, by method: %s; %.2f once settled %v later",
		bin.name, strings.Join(methods, ", "), r.settled, *settle)
	b.Logf("%s: kubectl apply %.1f s; every object %.1f s after its start; MiniCluster to its Job p50 %.2f s, p99 %.2f s", bin.name, r.apply, r.all, p50, p99)
	logMemory(b, bin.name, n, r.memory, "every object in")
	return r
}

// objectsOf returns the objects bin's manager makes of mc that a run waits for, as
// resource/name, the Job first.
func objectsOf(bin binary, mc *fluxv1alpha2.MiniCluster) []string {
	if bin.fluxOperator {
		// Its Job is named after the MiniCluster, its headless Service too when
		// spec.network.headlessName is empty, and its one ConfigMap holds the entrypoints.
		return []string{"jobs/" + mc.Name, "services/" + mc.Name, "configmaps/" + mc.Name + "-entrypoint"}
	}
	return []string{"jobs/" + names.JobName(mc), "services/" + mc.HeadlessName(),
		"configmaps/" + names.ConfigMapName(mc), "configmaps/" + names.EntrypointConfigMapName(mc)}
}

// seen is when the benchmark first saw each object of the namespace, by resource/name.
type seen struct {
	mu sync.Mutex
	at map[string]time.Time
}

// watch watches the metadata of the namespace's MiniClusters, Jobs, Services and ConfigMaps until
// the run ends, and returns what it saw, once it listed each.
func watch(b *testing.B, env *testenv.Env) *seen {
	b.Helper()
	s := &seen{at: map[string]time.Time{}}
	factory := metadatainformer.NewFilteredSharedInformerFactory(metadataClient(b, env), 0, namespace, nil)
	for _, gvr := range []schema.GroupVersionResource{miniClustersResource, jobsResource, servicesResource, configMapsResource} {
		if _, err := factory.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
					s.add(gvr.Resource + "/" + o.Name)
				}
			},
		}); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	for gvr, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			b.Fatalf("listing %s", gvr)
		}
	}
	return s
}

func (s *seen) add(key string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[key]; !ok {
		s.at[key] = now
	}
}

// all reports whether every object of want was seen.
func (s *seen) all(want [][]string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, keys := range want {
		for _, k := range keys {
			if _, ok := s.at[k]; !ok {
				return false
			}
		}
	}
	return true
}

// last returns when the last object of want was seen.
func (s *seen) last(want [][]string) time.Time {
	var last time.Time
	for _, keys := range want {
		for _, k := range keys {
			last = latest(last, s.when(k))
		}
	}
	return last
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// when returns when the object key was first seen.
func (s *seen) when(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[key]
}

func metadataClient(b *testing.B, env *testenv.Env) metadata.Interface {
	b.Helper()
	c, err := metadata.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// requests returns how many requests the manager sent so far, in all and by method, as its
// client-go counts them (rest_client_requests_total, which controller-runtime serves with the
// manager's metrics, in the Flux Operator's version too): every request the manager made, the
// lists and watches of its caches among them, whatever its answer.
func requests(b testing.TB, addr string) (float64, map[string]float64) {
	b.Helper()
	var total float64
	byMethod := map[string]float64{}
	scanMetrics(b, addr, func(line string) {
		labels, ok := strings.CutPrefix(line, "rest_client_requests_total{")
		if !ok {
			return
		}
		labels, value, ok := strings.Cut(labels, "} ")
		if !ok {
			b.Fatalf("reading the manager's metrics: %q is not a sample", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("reading the manager's metrics: %q: %v", line, err)
		}
		method := "?"
		for label := range strings.SplitSeq(labels, ",") {
			if m, ok := strings.CutPrefix(label, `method="`); ok {
				method = strings.TrimSuffix(m, `"`)
			}
		}
		total += v
		byMethod[method] += v
	})
	return total, byMethod
}

// percentile returns the p-th percentile of values (nearest rank).
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// compare reports the ratios of the first binary's figures (fluxfed) to the Flux Operator's in
// the runs of one size, and logs a table of every binary's figures, with kubectl apply's time
// beside its time alone on the same CRD.
func compare(b *testing.B, bins []binary, results map[string]*applied, alone map[string]float64, n int) {
	b.Helper()
	fo, ff := bins[len(bins)-1], bins[0]
	for _, bin := range bins {
		if results[bin.name] == nil {
			b.Fatalf("the run of %s at %d MiniClusters failed: nothing to compare", bin.name, n)
		}
	}
	rows := []struct {
		label, format, unit string
		value               func(r *applied, bin binary) float64
	}{
		{"kubectl apply → every Job, Service, ConfigMap (s)", "%.1f", "s-ratio", func(r *applied, _ binary) float64 { return r.all }},
		{"MiniCluster → its Job p50 (s)", "%.2f", "p50-ratio", func(r *applied, _ binary) float64 { return percentile(r.latencies, 50) }},
		{"MiniCluster → its Job p99 (s)", "%.2f", "p99-ratio", func(r *applied, _ binary) float64 { return percentile(r.latencies, 99) }},
		{"manager requests per MiniCluster, until every object", "%.2f", "requests-ratio", func(r *applied, _ binary) float64 { return r.requests }},
		{"manager requests per MiniCluster, " + settle.String() + " later", "%.2f", "settled-requests-ratio", func(r *applied, _ binary) float64 { return r.settled }},
		{"kubectl apply while the manager runs (s)", "%.1f", "apply-ratio", func(r *applied, _ binary) float64 { return r.apply }},
		{"the same / kubectl apply alone on its CRD", "%.2f", "slowdown-ratio", func(r *applied, bin binary) float64 { return r.apply / alone[bin.crd] }},
		{"manager peak RSS (MiB)", "%.1f", "peak-ratio", func(r *applied, _ binary) float64 { return float64(r.memory.peak) / mib }},
		{"manager CPU (s)", "%.1f", "cpu-ratio", func(r *applied, _ binary) float64 { return r.memory.cpu }},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d MiniClusters, one kubectl apply (load average now %s):\n| |", n, loadAverage())
	for _, bin := range bins {
		out.WriteString(" " + bin.name + " |")
	}
	fmt.Fprintf(&out, " %s / %s |\n|---|%s---|\n", ff.name, fo.name, strings.Repeat("---|", len(bins)))
	for _, row := range rows {
		out.WriteString("| " + row.label + " |")
		for _, bin := range bins {
			out.WriteString(" " + fmt.Sprintf(row.format, row.value(results[bin.name], bin)) + " |")
		}
		ratio := row.value(results[ff.name], ff) / row.value(results[fo.name], fo)
		fmt.Fprintf(&out, " %.3g |\n", ratio)
		b.ReportMetric(ratio, row.unit)
	}
	fmt.Fprintf(&out, "kubectl apply alone: %.1f s on fluxfed's CRD, %.1f s on the Flux Operator's", alone[ff.crd], alone[fo.crd])
	b.ReportMetric(0, "ns/op") // the figures are the ratios
	b.Log(out.String())
}

// loadAverage returns the three load averages.
func loadAverage() string {
	load, _ := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(load))
	return strings.Join(fields[:min(3, len(fields))], " ")
}
