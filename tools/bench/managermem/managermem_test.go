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
	"net"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

var (
	sizes      = flag.String("managermem.sizes", "100,300,1000", "comma-separated numbers of MiniClusters, one API server each")
	binaries   = flag.String("managermem.binaries", "fluxfed", "comma-separated binaries to measure: fluxfed (run as `fluxfed manager`) or NAME=./PACKAGE (another main that runs the manager with its flags, e.g. one that calls internal/manager alone, or ./cmd/fluxfed built with -overlay)")
	wait       = flag.Duration("managermem.wait", 15*time.Minute, "how long a run waits for every MiniCluster to have a status before it fails")
	profiles   = flag.String("managermem.profiles", "", "directory to write the heap profile of each run to, NAME-mc=N.heap (go tool pprof -sample_index inuse_space), taken once everything settled")
	managerEnv = flag.String("managermem.env", "", "comma-separated NAME=VALUE added to the manager's environment, e.g. GOGC=50")
	settle     = flag.Duration("managermem.settle", 5*time.Second, "how long the manager runs once every MiniCluster has a status before its memory is read")
)

// binary is a manager binary the benchmark measures: the package it is built from and the
// arguments that run the manager.
type binary struct {
	name, pkg string
	args      []string
}

var known = map[string]binary{
	"fluxfed": {name: "fluxfed", pkg: "./cmd/fluxfed", args: []string{"manager"}},
}

// BenchmarkManagerMemory runs each manager binary, as the image runs it, against an API server
// of its own for each number of MiniClusters (size 4), creates them ten at a time, waits until
// every one has a status of its generation, lets it settle and reports the process's memory:
// peak RSS (VmHWM), the file-backed and anonymous parts of its RSS then, the highest anonymous
// RSS seen while it worked, the Go heap in use (its metrics), its CPU time and the size of the
// binary. Sizes run in turn, binaries interleaved within a size, so that ratios of binaries
// come from the same load. The load average is logged at the start of each run.
func BenchmarkManagerMemory(b *testing.B) {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it
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
			b.Fatalf("-managermem.binaries: unknown binary %q (fluxfed or NAME=./PACKAGE)", name)
		}
		bins = append(bins, bin)
	}
	var ns []int
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("-managermem.sizes: %q is not a positive number", s)
		}
		ns = append(ns, n)
	}
	dir := b.TempDir()
	paths := map[string]string{}
	for _, bin := range bins {
		paths[bin.name] = build(b, dir, bin)
	}
	for _, n := range ns {
		for _, bin := range bins {
			b.Run(fmt.Sprintf("%s/mc=%d", bin.name, n), func(b *testing.B) {
				for range b.N {
					measure(b, bin, paths[bin.name], n)
				}
			})
		}
	}
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
}

func measure(b *testing.B, bin binary, path string, n int) {
	b.StopTimer()
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average at the start: %s", strings.TrimSpace(string(load)))
	env := testenv.Start(b)
	ctx := context.Background()
	kubeconfig, err := env.Kubeconfig()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	const namespace = "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}

	metricsAddr := freeAddr(b)
	probeAddr := freeAddr(b)
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	args := append(append([]string{}, bin.args...),
		"--kubeconfig="+kubeconfigPath,
		"--metrics-secure=false", "--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address="+probeAddr)
	pprofAddr := ""
	if *profiles != "" {
		pprofAddr = freeAddr(b)
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	// A copy of its own, written as containerd unpacks an image layer (32 KiB writes): how much
	// of its binary a process maps depends on the page cache's folios of the file (the kernel
	// maps whole folios around a page that faults), which depend on how the file was written.
	// The same binary written at once is mapped whole (61 of 61 MiB on Linux 6.18), written by
	// the linker or in 32 KiB writes about two thirds of it.
	exe := filepath.Join(dir, bin.name)
	copyFile(b, path, exe)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = os.Environ()
	if *managerEnv != "" {
		cmd.Env = append(cmd.Env, strings.Split(*managerEnv, ",")...)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", bin.name, err)
	}
	// exited is closed once the manager exited, with waitErr set.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if b.Failed() {
			b.Logf("%s exited: %v", bin.name, waitErr)
			if data, err := os.ReadFile(logPath); err == nil {
				b.Logf("%s log ends:\n%s", bin.name, tail(data, 4096))
			}
		}
	})
	pid := cmd.Process.Pid

	// The manager is up once its probes answer; its caches are synced a moment later.
	if err := poll(time.Minute, func() bool {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, exited); err != nil {
		b.Fatalf("%s did not become ready: %v", bin.name, err)
	}
	time.Sleep(2 * time.Second)
	var f figures
	f.startRSS = procStatus(b, pid)["VmRSS"]

	mcs := make([]*fluxv1alpha2.MiniCluster, n)
	for i := range mcs {
		mcs[i] = v1alpha2test.MiniCluster(fmt.Sprintf("mc-%04d", i)).Namespace(namespace).Size(4).Obj()
	}
	b.StartTimer()
	t0 := time.Now()
	var peakAnon int64
	var mu sync.Mutex
	sample := func() {
		anon := procStatus(b, pid)["RssAnon"]
		mu.Lock()
		peakAnon = max(peakAnon, anon)
		mu.Unlock()
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	testenv.CreateAll(b, env.Client, mcs)
	if err := poll(*wait, func() bool { return allReported(ctx, env.Client, namespace, n) }, exited); err != nil {
		b.Fatalf("not every one of %d MiniClusters has a status of its generation: %v", n, err)
	}
	f.elapsed = time.Since(t0).Seconds()
	b.StopTimer()
	logManagedFields(ctx, b, env.Client, mcs[0])
	time.Sleep(*settle)
	close(stopSampling)
	<-sampled
	sample()

	st := procStatus(b, pid)
	f.peak, f.rssFile, f.rssAnon, f.peakAnon = st["VmHWM"], st["RssFile"], st["RssAnon"], peakAnon
	f.cpu = cpuSeconds(b, pid)
	f.mapped = binaryRSS(b, pid)
	f.heapInuse = metric(b, metricsAddr, "go_memstats_heap_inuse_bytes")
	if pprofAddr != "" {
		saveHeapProfile(b, pprofAddr, filepath.Join(*profiles, fmt.Sprintf("%s-mc=%d.heap", bin.name, n)))
	}
	info, err := os.Stat(exe)
	if err != nil {
		b.Fatal(err)
	}

	const mib = 1 << 20
	b.ReportMetric(float64(f.peak)/mib, "peak-MiB")
	b.ReportMetric(float64(f.rssFile)/mib, "file-MiB")
	b.ReportMetric(float64(f.rssAnon)/mib, "anon-MiB")
	b.ReportMetric(float64(f.peakAnon)/mib, "peak-anon-MiB")
	b.ReportMetric(float64(f.heapInuse)/mib, "heap-inuse-MiB")
	b.ReportMetric(float64(f.startRSS)/mib, "idle-rss-MiB")
	b.ReportMetric(f.cpu, "cpu-s")
	b.ReportMetric(f.elapsed, "s")
	b.ReportMetric(float64(info.Size())/mib, "binary-MiB")
	b.ReportMetric(float64(f.mapped["r-xp"])/mib, "text-MiB")
	b.ReportMetric(float64(f.mapped["r--p"])/mib, "rodata-MiB")
	b.ReportMetric(0, "ns/op") // the time that matters is s, above
	load, _ = os.ReadFile("/proc/loadavg")
	b.Logf("%s at %d MiniClusters: peak RSS %.1f MiB (file %.1f, anon %.1f MiB after; anon peak %.1f MiB), heap in use %.1f MiB, RSS before the MiniClusters %.1f MiB, CPU %.1f s, all reported in %.1f s, binary %.1f MiB (of it in RSS: code %.1f, read-only data %.1f, data %.1f MiB); load average at the end: %s",
		bin.name, n, float64(f.peak)/mib, float64(f.rssFile)/mib, float64(f.rssAnon)/mib, float64(f.peakAnon)/mib,
		float64(f.heapInuse)/mib, float64(f.startRSS)/mib, f.cpu, f.elapsed, float64(info.Size())/mib,
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

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		b.Fatal(err)
	}
	return addr
}

// poll calls done every second until it is true, the timeout passes or the process exits.
func poll(timeout time.Duration, done func() bool, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("still not after %v", timeout)
		}
		select {
		case <-exited:
			return errors.New("the manager exited")
		case <-time.After(time.Second):
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

// metric returns the value of a Prometheus gauge without labels from the manager's metrics.
func metric(b *testing.B, addr, name string) int64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("reading the manager's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("metric %s: %v", name, err)
			}
			return int64(v)
		}
	}
	b.Fatalf("the manager's metrics have no %s", name)
	return 0
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
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		b.Fatalf("reading the manager's heap profile: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("reading the manager's heap profile: %s %v", resp.Status, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profile: %s", path)
}

func tail(data []byte, n int) []byte {
	if len(data) > n {
		return data[len(data)-n:]
	}
	return data
}
