package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

var (
	admissionN       = flag.Int("fluxfed.admission.n", 1000, "how many MiniClusters BenchmarkMiniClusterAdmission creates of each CRD variant")
	admissionClients = flag.Int("fluxfed.admission.clients", 4, "how many clients create MiniClusters at once in BenchmarkMiniClusterAdmission")
)

// admissionRounds is how many turns the variants take: each creates n/admissionRounds
// MiniClusters per turn, so that a change in the machine's load hits them alike.
const admissionRounds = 20

// BenchmarkMiniClusterAdmission creates MiniClusters (the Flux Operator's usual shape: one
// container, size 4) on one kube-apiserver through three CRDs that differ only in their rules
// and group: the baseline's rules (group baseline.flux-framework.org), the current ones
// (flux-framework.org, as installed) and none at all (nocel.flux-framework.org), taking turns
// from a few clients at once. It reports, per variant, the CPU time kube-apiserver spent per
// create (the sum over its threads of /proc's schedstat, read around each turn; the median of the turns, which
// a burst of load on a shared machine moves least), the wall time per create and
// the server's own latency per create (apiserver_request_duration_seconds, verb POST, by
// group); the difference to "nocel" is what the rules cost, and cel-share-% is that difference
// over the current variant's CPU time.
//
// Run it with:
//
//	go test ./tools/celcost -run '^$' -bench MiniClusterAdmission -benchtime 1x
func BenchmarkMiniClusterAdmission(b *testing.B) {
	for range b.N {
		env := testenv.Start(b)
		ctx := context.Background()
		v := variants(b)
		groups := []struct{ name, group string }{
			{"baseline", "baseline.flux-framework.org"},
			{"current", "flux-framework.org"},
			{"nocel", "nocel.flux-framework.org"},
		}
		installVariant(b, env.Config, v[0].crd, groups[0].group, false)
		installVariant(b, env.Config, v[1].crd, groups[2].group, true)

		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 5000, 5000
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"generateName": "admission-"}}}
		created, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		namespace := created.GetName()

		per := max(*admissionN/admissionRounds, 1)
		pid := apiServerPID(b)
		wall := make([]time.Duration, len(groups))
		cpu := make([][]float64, len(groups))
		before := postTimes(b, env.Config)
		b.ResetTimer()
		for round := range admissionRounds {
			for k := range groups {
				// Each round starts with another variant.
				i := (k + round) % len(groups)
				g := groups[i]
				gvr := schema.GroupVersionResource{Group: g.group, Version: "v1alpha2", Resource: "miniclusters"}
				cpu0, start := cpuTime(b, pid), time.Now()
				createMany(b, client.Resource(gvr).Namespace(namespace), g.group, round*per, per, *admissionClients)
				wall[i] += time.Since(start)
				cpu[i] = append(cpu[i], float64((cpuTime(b, pid)-cpu0).Microseconds())/float64(per))
			}
		}
		b.StopTimer()
		after := postTimes(b, env.Config)
		total := float64(per * admissionRounds)
		for i, g := range groups {
			b.ReportMetric(median(cpu[i]), g.name+"-cpu-µs/create")
			b.ReportMetric(float64(wall[i].Microseconds())/total, g.name+"-wall-µs/create")
			d := after[g.group].sub(before[g.group])
			if d.count > 0 {
				b.ReportMetric(d.sum/d.count*1e6, g.name+"-server-µs/create")
			}
		}
		if base, cur, none := median(cpu[0]), median(cpu[1]), median(cpu[2]); base > 0 && cur > 0 {
			b.ReportMetric(100*(cur-none)/cur, "current-cel-share-%")
			b.ReportMetric(100*(base-none)/base, "baseline-cel-share-%")
		}
		b.Logf("%d MiniClusters per variant, %d clients, %d turns", int(total), *admissionClients, admissionRounds)
	}
}

// installVariant creates the MiniCluster CRD crdYAML under another group, without its rules
// when noRules is set, and waits until it is served.
func installVariant(tb testing.TB, cfg *rest.Config, crdYAML []byte, group string, noRules bool) {
	tb.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crdYAML, &crd); err != nil {
		tb.Fatal(err)
	}
	crd.Spec.Group = group
	crd.Name = crd.Spec.Names.Plural + "." + group
	crd.ResourceVersion = ""
	if noRules {
		for i := range crd.Spec.Versions {
			dropRules(crd.Spec.Versions[i].Schema.OpenAPIV3Schema)
		}
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("creating the CRD %s: %v", crd.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.CRDTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tb.Fatalf("waiting for the CRD %s to be established: %v", crd.Name, err)
	}
}

// dropRules removes every x-kubernetes-validations rule from s and what is under it.
func dropRules(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.XValidations = nil
	for k, p := range s.Properties {
		dropRules(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		dropRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		dropRules(s.AdditionalProperties.Schema)
	}
}

// createMany creates n MiniClusters named mc-<from>... from clients clients at once.
func createMany(tb testing.TB, r dynamic.ResourceInterface, group string, from, n, clients int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- from + i
	}
	close(next)
	for range clients {
		wg.Go(func() {
			for i := range next {
				mc := v1alpha2test.MiniCluster(fmt.Sprintf("mc-%04d", i)).Size(4).Obj()
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mc)
				if err != nil {
					errs <- err
					return
				}
				u := &unstructured.Unstructured{Object: obj}
				u.SetAPIVersion(group + "/v1alpha2")
				u.SetNamespace("")
				if _, err := r.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating MiniCluster %s of %s: %w", u.GetName(), group, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// histogram is the sum and count of a histogram of the API server's metrics.
type histogram struct{ sum, count float64 }

func (h histogram) sub(o histogram) histogram { return histogram{h.sum - o.sum, h.count - o.count} }

// postTimes reads apiserver_request_duration_seconds for POSTs of miniclusters, by group.
func postTimes(tb testing.TB, cfg *rest.Config) map[string]histogram {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]histogram{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "apiserver_request_duration_seconds_sum" && name != "apiserver_request_duration_seconds_count") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, `resource="miniclusters"`) || !strings.Contains(labels, `verb="POST"`) {
			continue
		}
		group := label(labels, "group")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			tb.Fatalf("reading %q: %v", line, err)
		}
		h := out[group]
		if strings.HasSuffix(name, "_sum") {
			h.sum += v
		} else {
			h.count += v
		}
		out[group] = h
	}
	return out
}

// label returns the value of the label name in a metric's labels.
func label(labels, name string) string {
	for l := range strings.SplitSeq(labels, ",") {
		if v, ok := strings.CutPrefix(l, name+`="`); ok {
			return strings.TrimSuffix(v, `"`)
		}
	}
	return ""
}

// apiServerPID finds the kube-apiserver that testenv started: the child of this process.
func apiServerPID(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		comm, fields, ok := statFields(string(stat))
		if ok && comm == "kube-apiserver" && fields[1] == strconv.Itoa(os.Getpid()) {
			return pid
		}
	}
	tb.Fatal("no kube-apiserver started by this process found in /proc")
	return 0
}

// cpuTime returns the CPU time that process pid's threads have used, in nanoseconds: the sum of
// the first field of /proc/<pid>/task/*/schedstat (utime and stime in /proc/<pid>/stat count
// 10 ms ticks, too coarse for a turn of a few hundred milliseconds).
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("listing the threads of kube-apiserver (pid %d): %v", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			tb.Fatalf("reading %s: %v", t, err)
		}
		total += time.Duration(ns)
	}
	return total
}

// statFields splits /proc/<pid>/stat into the command name and the fields after it (state
// first).
func statFields(stat string) (string, []string, bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	fields := strings.Fields(stat[end+1:])
	return stat[open+1 : end], fields, len(fields) > 1
}

// median returns the median of xs (0 when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
