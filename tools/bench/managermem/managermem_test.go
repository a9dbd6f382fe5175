package managermem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

var (
	sizes       = flag.String("managermem.sizes", "100,300,1000", "comma-separated numbers of MiniClusters, one API server each")
	binaries    = flag.String("managermem.binaries", "fluxfed-manager", "comma-separated binaries to measure: fluxfed-manager (./cmd/fluxfed-manager, the MiniCluster operator alone, as the image runs it), fluxfed (run as `fluxfed manager`) or NAME=./PACKAGE (another main that runs the manager with its flags, or ./cmd/fluxfed built with -overlay); beside the Flux Operator the first is compared with it")
	wait        = flag.Duration("managermem.wait", 15*time.Minute, "how long a run waits for every MiniCluster to have a status (or, beside the Flux Operator, every object) before it fails")
	profiles    = flag.String("managermem.profiles", "", "directory to write the profiles of each run to: NAME-mc=N.heap, the heap of a fluxfed binary once everything settled (go tool pprof -sample_index inuse_space), NAME-mc=N.cpu.K, its CPU in consecutive profiles of 5 s from the first create until everything exists (go tool pprof -top NAME-mc=N.cpu.*), and RUN.apiserver.cpu.K, the API server's meanwhile")
	managerEnv  = flag.String("managermem.env", "", "comma-separated NAME=VALUE added to the manager's environment, e.g. GOGC=50")
	managerArgs = flag.String("managermem.args", "", "comma-separated flags added to fluxfed's manager (not the Flux Operator's), e.g. --max-concurrent-reconciles=1")
	settle      = flag.Duration("managermem.settle", 5*time.Second, "how long the manager runs once every MiniCluster has a status before its memory is read")
	fluxOp      = flag.String("managermem.fluxoperator", "", "MANAGER,CRD: measure the Flux Operator's manager binary too (built from its source), on API servers that have its MiniCluster CRD (the file CRD) in place of fluxfed's. Every run then creates the MiniClusters with one kubectl apply and waits for every Job, headless Service and ConfigMap, and each size also times kubectl apply with no manager running")
	busy        = flag.Int("managermem.busy", 0, "number of CPU-burning processes that run from before the first run until the last one ended: the same load for every binary")
)

// binary is a manager binary the benchmark measures: the package it is built from and the
// arguments that run the manager, or, for the Flux Operator, the binary built elsewhere and its
// CRD.
type binary struct {
	name, pkg string
	args      []string
	// fluxOperator is set for the Flux Operator's manager: it takes its own flags, serves no
	// pprof, and runs on API servers with its CRD (crd, a file) in place of fluxfed's.
	fluxOperator bool
	path, crd    string
}

var known = map[string]binary{
	"fluxfed-manager": {name: "fluxfed-manager", pkg: "./cmd/fluxfed-manager"},
	"fluxfed":         {name: "fluxfed", pkg: "./cmd/fluxfed", args: []string{"manager"}},
}

// BenchmarkManagerMemory runs each manager binary, as the image runs it, against an API server
// of its own for each number of MiniClusters (size 4), creates them ten at a time, waits until
// every one has a status of its generation, lets it settle and reports the process's memory:
// peak RSS (VmHWM), the file-backed and anonymous parts of its RSS then, the highest anonymous
// RSS seen while it worked, the Go heap in use (its metrics), its CPU time and the size of the
// binary. Sizes run in turn, binaries interleaved within a size, so that ratios of binaries
// come from the same load. The load average is logged at the start of each run.
//
// With -managermem.fluxoperator the Flux Operator runs beside them and every run is the one
// sideBySide describes.
func BenchmarkManagerMemory(b *testing.B) {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it
	bins := parseBinaries(b)
	ns := counts(b, "-managermem.sizes", *sizes, 1)
	dir := b.TempDir()
	paths := map[string]string{}
	for _, bin := range bins {
		paths[bin.name] = bin.path
		if bin.path == "" {
			paths[bin.name] = build(b, dir, bin)
		}
	}
	if *busy > 0 {
		burn(b, *busy)
	}
	for _, n := range ns {
		if *fluxOp != "" {
			sideBySide(b, bins, paths, n)
			continue
		}
		for _, bin := range bins {
			b.Run(fmt.Sprintf("%s/mc=%d", bin.name, n), func(b *testing.B) {
				for range b.N {
					measure(b, bin, paths[bin.name], n)
				}
			})
		}
	}
}

// counts parses list, the comma-separated value of flag name, into numbers of at least least.
func counts(b *testing.B, name, list string, least int) []int {
	b.Helper()
	var ns []int
	for s := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < least {
			b.Fatalf("%s: %q is not a number of at least %d", name, s, least)
		}
		ns = append(ns, n)
	}
	return ns
}

// parseBinaries returns the binaries of -managermem.binaries, and the Flux Operator's last when
// -managermem.fluxoperator names it.
func parseBinaries(b *testing.B) []binary {
	b.Helper()
	var bins []binary
	for name := range strings.SplitSeq(*binaries, ",") {
		bin, ok := known[name]
		if n, pkg, isPkg := strings.Cut(name, "="); isPkg {
			bin, ok = binary{name: n, pkg: pkg}, true
			for _, k := range known {
				if k.pkg == pkg {
					bin.args = k.args // ./cmd/fluxfed built another way: still fluxfed manager
				}
			}
		}
		if !ok {
			b.Fatalf("-managermem.binaries: unknown binary %q (fluxfed-manager, fluxfed or NAME=./PACKAGE)", name)
		}
		bins = append(bins, bin)
	}
	if *fluxOp == "" {
		return bins
	}
	path, crd, ok := strings.Cut(*fluxOp, ",")
	if !ok || path == "" || crd == "" {
		b.Fatalf("-managermem.fluxoperator: %q is not MANAGER,CRD (the Flux Operator's manager binary and its MiniCluster CRD file)", *fluxOp)
	}
	for _, f := range []string{path, crd} {
		if _, err := os.Stat(f); err != nil {
			b.Fatalf("-managermem.fluxoperator: %v", err)
		}
	}
	return append(bins, binary{name: "fluxoperator", fluxOperator: true, path: path, crd: crd})
}

// build builds bin as the image does (static, no symbol table) and returns its path.
func build(b *testing.B, dir string, bin binary) string {
	b.Helper()
	out := filepath.Join(dir, bin.name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, bin.pkg)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", bin.pkg, err, msg)
	}
	return out
}

// figures are what one run reads of the manager process, in bytes and seconds.
type figures struct {
	peak, rssFile, rssAnon, peakAnon, heapInuse, startRSS int64
	cpu, elapsed                                          float64
	// mapped is the RSS of the mappings of the binary by permissions: r-xp its code, r--p its
	// read-only data (types, strings, the function table), rw-p its data.
	mapped map[string]int64
	// binarySize is the size of its executable.
	binarySize int64
}

// namespace holds the MiniClusters of every run.
const namespace = "bench"

// measure is one run without the Flux Operator: bin's manager while n MiniClusters are created
// ten at a time, until every one has a status of its generation.
func measure(b *testing.B, bin binary, path string, n int) {
	b.StopTimer()
	logLoad(b, "at the start")
	env := testenv.Start(b)
	ctx := context.Background()
	dir := b.TempDir()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	m := startManager(b, bin, path, env, dir)

	mcs := miniClusters(n)
	b.StartTimer()
	t0 := time.Now()
	peakAnon := m.sampleAnon(b)
	stopCPU := m.profileCPU(b, n)
	stopServerCPU := profileAPIServer(b, env, fmt.Sprintf("%s-mc=%d", bin.name, n))
	testenv.CreateAll(b, env.Client, mcs)
	if err := poll(*wait, time.Second, func() bool { return allReported(ctx, env.Client, namespace, n) }, m.exited); err != nil {
		b.Fatalf("not every one of %d MiniClusters has a status of its generation: %v", n, err)
	}
	elapsed := time.Since(t0).Seconds()
	b.StopTimer()
	stopCPU()
	stopServerCPU()
	logManagedFields(ctx, b, env.Client, mcs[0])
	m.settleAndReport(b, peakAnon(), n, elapsed, bin.name, "all reported in")
}

// settleAndReport lets the manager settle, then reads, reports and logs its figures: elapsed is
// how long the run took, done names what it measures.
func (m *manager) settleAndReport(b *testing.B, peakAnon int64, n int, elapsed float64, name, done string) {
	b.Helper()
	time.Sleep(*settle)
	f := m.figures(b, peakAnon, n)
	f.elapsed = elapsed
	reportMemory(b, f)
	b.ReportMetric(f.elapsed, "s")
	b.ReportMetric(0, "ns/op") // the time that matters is s, above
	logMemory(b, name, n, f, done)
}

// miniClusters returns the n MiniClusters of a run, size 4, in namespace.
func miniClusters(n int) []*fluxv1alpha2.MiniCluster {
	mcs := make([]*fluxv1alpha2.MiniCluster, n)
	for i := range mcs {
		mcs[i] = v1alpha2test.MiniCluster(fmt.Sprintf("mc-%04d", i)).Namespace(namespace).Size(4).Obj()
	}
	return mcs
}

// logLoad logs the load average, and how many processes burn CPU for the benchmark.
func logLoad(b *testing.B, when string) {
	b.Helper()
	b.Logf("load average %s: %s (CPU-burning processes of the benchmark: %d)", when, loadAverage(), *busy)
}

// manager is a manager process a run started; it is stopped when the run ends.
type manager struct {
	bin                    binary
	pid                    int
	exe                    string
	metricsAddr, pprofAddr string
	// exited is closed once the process exited.
	exited chan struct{}
	// kubeconfig reaches the run's API server as an administrator.
	kubeconfig string
	// startRSS is its RSS once it was ready, before any MiniCluster.
	startRSS int64
}

// startManager starts bin's manager against env, as an administrator, and returns once its
// probes answer and its caches have had a moment to sync. Its log is kept in dir and printed if
// the run fails.
func startManager(b *testing.B, bin binary, path string, env *testenv.Env, dir string, extra ...string) *manager {
	b.Helper()
	m := &manager{bin: bin, kubeconfig: env.WriteKubeconfig(b, dir), metricsAddr: testenv.FreeAddr(b)}
	probeAddr := testenv.FreeAddr(b)
	var args []string
	if bin.fluxOperator {
		// Its main takes the addresses, leader election and controller-runtime's --kubeconfig;
		// it registers no webhook, so its webhook port (9443) is never opened.
		args = []string{"--kubeconfig=" + m.kubeconfig, "--metrics-bind-address=" + m.metricsAddr,
			"--health-probe-bind-address=" + probeAddr, "--leader-elect=false"}
	} else {
		args = append(append([]string{}, bin.args...),
			"--kubeconfig="+m.kubeconfig,
			"--metrics-secure=false", "--metrics-bind-address="+m.metricsAddr,
			"--health-probe-bind-address="+probeAddr)
		args = append(args, extra...)
		if *managerArgs != "" {
			args = append(args, strings.Split(*managerArgs, ",")...)
		}
		if *profiles != "" {
			m.pprofAddr = testenv.FreeAddr(b)
			args = append(args, "--pprof-bind-address="+m.pprofAddr)
		}
	}
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	// A copy of its own, written as containerd unpacks an image layer (32 KiB writes): how much
	// of its binary a process maps depends on the page cache's folios of the file (the kernel
	// maps whole folios around a page that faults), which depend on how the file was written.
	// The same binary written at once is mapped whole (61 of 61 MiB on Linux 6.18), written by
	// the linker or in 32 KiB writes about two thirds of it.
	m.exe = filepath.Join(dir, bin.name)
	copyFile(b, path, m.exe)
	cmd := exec.Command(m.exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = os.Environ()
	if *managerEnv != "" {
		cmd.Env = append(cmd.Env, strings.Split(*managerEnv, ",")...)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", bin.name, err)
	}
	m.pid = cmd.Process.Pid
	m.exited = make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(m.exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-m.exited
		}
		_ = logFile.Close()
		if b.Failed() {
			b.Logf("%s exited: %v", bin.name, waitErr)
			if data, err := os.ReadFile(logPath); err == nil {
				b.Logf("%s log ends:\n%s", bin.name, tail(data, 4096))
			}
		}
	})

	// The manager is up once its probes answer; its caches are synced a moment later.
	if err := poll(time.Minute, time.Second, func() bool {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, m.exited); err != nil {
		b.Fatalf("%s did not become ready: %v", bin.name, err)
	}
	time.Sleep(2 * time.Second)
	m.startRSS = procStatus(b, m.pid)["VmRSS"]
	return m
}

// sampleAnon samples the manager's anonymous RSS every 200 ms until the function it returns is
// called, which returns the highest seen.
func (m *manager) sampleAnon(b *testing.B) func() int64 {
	var peak int64
	var mu sync.Mutex
	sample := func() {
		anon := procStatus(b, m.pid)["RssAnon"]
		mu.Lock()
		peak = max(peak, anon)
		mu.Unlock()
	}
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-stopped
		sample()
		return peak
	}
}

// figures reads the manager's memory and CPU once everything settled, and saves its heap profile
// when it serves one and -managermem.profiles asks for it.
func (m *manager) figures(b *testing.B, peakAnon int64, n int) figures {
	b.Helper()
	st := procStatus(b, m.pid)
	f := figures{peak: st["VmHWM"], rssFile: st["RssFile"], rssAnon: st["RssAnon"], peakAnon: peakAnon, startRSS: m.startRSS}
	f.cpu = cpuSeconds(b, m.pid)
	f.mapped = binaryRSS(b, m.pid)
	f.heapInuse = -1
	if v, ok := metric(b, m.metricsAddr, "go_memstats_heap_inuse_bytes"); ok {
		f.heapInuse = int64(v)
	}
	if m.pprofAddr != "" {
		saveHeapProfile(b, m.pprofAddr, filepath.Join(*profiles, fmt.Sprintf("%s-mc=%d.heap", m.bin.name, n)))
	}
	info, err := os.Stat(m.exe)
	if err != nil {
		b.Fatal(err)
	}
	f.binarySize = info.Size()
	return f
}

const mib = 1 << 20

// reportMemory reports the memory and CPU figures of a run.
func reportMemory(b *testing.B, f figures) {
	b.ReportMetric(float64(f.peak)/mib, "peak-MiB")
	b.ReportMetric(float64(f.rssFile)/mib, "file-MiB")
	b.ReportMetric(float64(f.rssAnon)/mib, "anon-MiB")
	b.ReportMetric(float64(f.peakAnon)/mib, "peak-anon-MiB")
	if f.heapInuse >= 0 {
		b.ReportMetric(float64(f.heapInuse)/mib, "heap-inuse-MiB")
	}
	b.ReportMetric(float64(f.startRSS)/mib, "idle-rss-MiB")
	b.ReportMetric(f.cpu, "cpu-s")
	b.ReportMetric(float64(f.binarySize)/mib, "binary-MiB")
	b.ReportMetric(float64(f.mapped["r-xp"])/mib, "text-MiB")
	b.ReportMetric(float64(f.mapped["r--p"])/mib, "rodata-MiB")
}

// logMemory logs the figures of a run in a sentence; done names what elapsed measures.
func logMemory(b *testing.B, name string, n int, f figures, done string) {
	b.Helper()
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("%s at %d MiniClusters: peak RSS %.1f MiB (file %.1f, anon %.1f MiB after; anon peak %.1f MiB), heap in use %.1f MiB, RSS before the MiniClusters %.1f MiB, CPU %.1f s, %s %.1f s, binary %.1f MiB (of it in RSS: code %.1f, read-only data %.1f, data %.1f MiB); load average at the end: %s",
		name, n, float64(f.peak)/mib, float64(f.rssFile)/mib, float64(f.rssAnon)/mib, float64(f.peakAnon)/mib,
		float64(f.heapInuse)/mib, float64(f.startRSS)/mib, f.cpu, done, f.elapsed, float64(f.binarySize)/mib,
		float64(f.mapped["r-xp"])/mib, float64(f.mapped["r--p"])/mib, float64(f.mapped["rw-p"])/mib, strings.TrimSpace(string(load)))
}

// copyFile copies the executable from to to in 32 KiB writes.
func copyFile(b *testing.B, from, to string) {
	b.Helper()
	src, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 32<<10)); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
}

// poll calls done every interval until it is true, the timeout passes or the process exits.
func poll(timeout, interval time.Duration, done func() bool, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("still not after %v", timeout)
		}
		select {
		case <-exited:
			return errors.New("the manager exited")
		case <-time.After(interval):
		}
	}
	return nil
}

// allReported reports whether all n MiniClusters of the namespace have a status computed from
// their generation.
func allReported(ctx context.Context, c client.Client, namespace string, n int) bool {
	var mcs fluxv1alpha2.MiniClusterList
	if err := c.List(ctx, &mcs, client.InNamespace(namespace)); err != nil || len(mcs.Items) < n {
		return false
	}
	for _, mc := range mcs.Items {
		if mc.Status.ObservedGeneration != mc.Generation {
			return false
		}
	}
	return true
}

// procStatus returns the sizes in bytes of /proc/PID/status (VmHWM, VmRSS, RssAnon, RssFile...).
func procStatus(b *testing.B, pid int) map[string]int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("reading the manager's memory: %v", err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(value)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[key] = kb << 10
		}
	}
	return out
}

// binaryRSS returns the RSS of the process's mappings of its own binary, by their permissions
// (/proc/PID/smaps).
func binaryRSS(b *testing.B, pid int) map[string]int64 {
	b.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		b.Fatalf("reading the manager's binary: %v", err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		b.Fatalf("reading the manager's mappings: %v", err)
	}
	out := map[string]int64{}
	perms := "" // of the mapping being read, when it maps the binary
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			perms = ""
			if len(fields) >= 6 && fields[5] == exe {
				perms = fields[1]
			}
		case perms != "" && len(fields) == 3 && fields[0] == "Rss:":
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				out[perms] += kb << 10
			}
		}
	}
	return out
}

// cpuSeconds returns the user and system CPU time of the process (/proc/PID/stat).
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("reading the manager's CPU time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("reading the manager's CPU time from %q", data)
	}
	const ticks = 100 // USER_HZ on Linux
	return (utime + stime) / ticks
}

// metric returns the value of a Prometheus gauge without labels from the manager's metrics, and
// whether it has it (the Flux Operator's may not).
func metric(b *testing.B, addr, name string) (float64, bool) {
	b.Helper()
	var value float64
	found := false
	scanMetrics(b, addr, func(line string) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("metric %s: %v", name, err)
			}
			value, found = f, true
		}
	})
	return value, found
}

// scanMetrics calls line with each line of the manager's metrics.
func scanMetrics(b testing.TB, addr string, line func(string)) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("reading the manager's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("reading the manager's metrics: %v", err)
	}
}

// logManagedFields logs the size of the managedFields of a MiniCluster and of its objects, as
// JSON, beside the size of the whole object: what a cache that keeps them holds besides the rest.
func logManagedFields(ctx context.Context, b *testing.B, c client.Client, mc *fluxv1alpha2.MiniCluster) {
	b.Helper()
	var sizes []string
	for _, o := range []struct {
		obj  client.Object
		name string
	}{
		{&fluxv1alpha2.MiniCluster{}, mc.Name}, {&batchv1.Job{}, names.JobName(mc)}, {&corev1.Service{}, mc.HeadlessName()},
		{&corev1.ConfigMap{}, names.ConfigMapName(mc)}, {&corev1.ConfigMap{}, names.EntrypointConfigMapName(mc)},
		{&corev1.Secret{}, names.CurveSecretName(mc)},
	} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: o.name}, o.obj); err != nil {
			b.Fatalf("reading %s: %v", o.name, err)
		}
		fields, err := json.Marshal(o.obj.GetManagedFields())
		if err != nil {
			b.Fatal(err)
		}
		whole, err := json.Marshal(o.obj)
		if err != nil {
			b.Fatal(err)
		}
		sizes = append(sizes, fmt.Sprintf("%T %s %d of %d", o.obj, o.name, len(fields), len(whole)))
	}
	b.Logf("bytes of managedFields of whole objects, as JSON: %s", strings.Join(sizes, ", "))
}

// saveHeapProfile writes the manager's heap profile to path.
func saveHeapProfile(b *testing.B, addr, path string) {
	b.Helper()
	if err := saveProfile(http.DefaultClient, "http://"+addr+"/debug/pprof/heap", path); err != nil {
		b.Fatalf("reading the manager's heap profile: %v", err)
	}
	b.Logf("heap profile: %s", path)
}

// profileCPU takes CPU profiles of the manager, 5 s each, one after the other, until the
// function it returns is called, which waits for the last one to end. It does nothing for a
// manager that serves no pprof.
func (m *manager) profileCPU(b *testing.B, n int) func() {
	b.Helper()
	if m.pprofAddr == "" {
		return func() {}
	}
	return profileCPU(b, http.DefaultClient, "http://"+m.pprofAddr, fmt.Sprintf("%s-mc=%d.cpu.", m.bin.name, n))
}

// profileAPIServer takes CPU profiles of env's kube-apiserver, as profileCPU does, when
// -managermem.profiles asks for profiles; run names the run.
func profileAPIServer(b *testing.B, env *testenv.Env, run string) func() {
	b.Helper()
	if *profiles == "" {
		return func() {}
	}
	c, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	return profileCPU(b, c, strings.TrimSuffix(env.Config.Host, "/"), run+".apiserver.cpu.")
}

// profileCPU takes CPU profiles of 5 s each, one after the other, from the pprof handlers of
// the server at base with c, into the files of -managermem.profiles named prefix followed by 1,
// 2..., until the function it returns is called, which waits for the last one to end.
func profileCPU(b *testing.B, c *http.Client, base, prefix string) func() {
	b.Helper()
	pattern := filepath.Join(*profiles, prefix)
	stale, _ := filepath.Glob(pattern + "*") // of an earlier run, which go tool pprof would merge in
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for k := 1; ; k++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := saveProfile(c, base+"/debug/pprof/profile?seconds=5", pattern+strconv.Itoa(k)); err != nil {
				done <- err
				return
			}
		}
	}()
	return func() {
		close(stop)
		if err := <-done; err != nil {
			b.Fatalf("taking a CPU profile from %s: %v", base, err)
		}
		b.Logf("CPU profiles: %s* (go tool pprof -top merges them)", pattern)
	}
}

// saveProfile writes the profile at url to path.
func saveProfile(c *http.Client, url, path string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, tail(data, 512))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func tail(data []byte, n int) []byte {
	if len(data) > n {
		return data[len(data)-n:]
	}
	return data
}
