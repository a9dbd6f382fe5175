package hub_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

var (
	benchRoots          = flag.Int("fluxfed.roots", 200, "how many roots BenchmarkManyRoots creates")
	benchSettled        = flag.Duration("fluxfed.settled", 30*time.Second, "how long BenchmarkManyRoots watches the settled federation")
	benchSettledProfile = flag.String("fluxfed.settledprofile", "", "where BenchmarkManyRoots writes a CPU profile of the settled federation")
	benchServerProfiles = flag.String("fluxfed.serverprofiles", "", "directory where BenchmarkManyRoots writes a CPU profile of each cluster's API server over the first 10 s of the roots' creation (go tool pprof kube-apiserver DIR/hub.cpu)")
)

// BenchmarkManyRoots measures the hub at scale with default settings: -fluxfed.roots roots (200
// by default), each bursting onto two members, are created ten at a time as fast as the hub's
// API server takes them. It reports, from each root's creation to both of its children existing
// on their members, the median and p99 and the roots per second, the hub process's CPU per root
// and peak RSS, the hub's requests per root to the members, the bursts that ended Failed, the
// hub's reconciles per root, and, once everything settled, the hub's requests to the members,
// CPU and reconciles per minute:
//
//	go test ./hub -run '^$' -bench ManyRoots -benchtime 1x -timeout 30m [-cpuprofile cpu.out -memprofile mem.out] [-fluxfed.serverprofiles DIR]
//
// The API servers run as processes of their own; the hub (with the member reconciler of the
// hub's cluster, as a hub runs it), the test's clients and its watches of the members share
// this process, so CPU and RSS are upper bounds of the hub's.
func BenchmarkManyRoots(b *testing.B) {
	n := *benchRoots
	for range b.N {
		b.StopTimer()
		f := startFederation(b, withDefaultHealth(hub.Options{}), "member-a", "member-b")
		ctx := context.Background()
		ns := f.namespace(b)
		a, m := f.members["member-a"], f.members["member-b"]
		seen := watchChildren(b, ns, a, m)

		memberBefore := a.requests.Load() + m.requests.Load()
		hubBefore := f.hubCount.mark()
		ports := hostPorts(b, f)
		eachBefore, serversBefore := serversCPU(ports)
		cpuBefore := cpuTime()
		reconcilesBefore := hubReconciles(b)
		created := make([]time.Time, n)
		serverProfiles := profileServers(b, map[string]*testenv.Env{"hub": f.hub, "member-a": a.env, "member-b": m.env})
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 10)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				root := newRoot(ns, fmt.Sprintf("root-%03d", i),
					fluxv1alpha2.Burst{Name: fmt.Sprintf("a-%03d", i), Cluster: "member-a", Size: 2},
					fluxv1alpha2.Burst{Name: fmt.Sprintf("b-%03d", i), Cluster: "member-b", Size: 2})
				created[i] = time.Now()
				require.NoError(b, f.hub.Client.Create(ctx, root))
			})
		}
		wg.Wait()
		createdIn := time.Since(start)
		var done []time.Duration
		var last time.Time
		deadline := time.Now().Add(20 * time.Minute)
		for {
			done, last = seen.latencies(n, created)
			if len(done) == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d roots have both children after 20 minutes", len(done), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := last.Sub(start)
		b.StopTimer()
		serverProfiles()
		cpu := cpuTime() - cpuBefore
		each, servers := serversCPU(ports)
		servers -= serversBefore
		hubWrites := f.hubCount.since(hubBefore)
		memberRequests := a.requests.Load() + m.requests.Load() - memberBefore
		reconciles := hubReconciles(b) - reconcilesBefore

		// Settled: every burst reported, then nothing is expected to move.
		failed := waitReported(b, f, ns, n)
		settledMembers := a.requests.Load() + m.requests.Load()
		settledCPU := cpuTime()
		settledReconciles := hubReconciles(b)
		if *benchSettledProfile != "" {
			out, err := os.Create(*benchSettledProfile)
			require.NoError(b, err)
			require.NoError(b, pprof.StartCPUProfile(out))
		}
		time.Sleep(*benchSettled)
		if *benchSettledProfile != "" {
			pprof.StopCPUProfile()
		}
		perMinute := time.Minute.Seconds() / benchSettled.Seconds()

		slices.Sort(done)
		b.ReportMetric(float64(done[len(done)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(done[(len(done)*99-1)/100].Milliseconds()), "p99-ms")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "roots/s")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(n), "cpu-ms/root")
		b.ReportMetric(float64(servers.Milliseconds())/float64(n), "apiservers-cpu-ms/root")
		b.ReportMetric(float64(len(hubWrites))/float64(n), "hub-writes/root")
		b.ReportMetric(float64(memberRequests)/float64(n), "member-requests/root")
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
		b.ReportMetric(float64(failed), "failed-bursts")
		b.ReportMetric(float64(a.requests.Load()+m.requests.Load()-settledMembers)*perMinute, "settled-member-requests/min")
		b.ReportMetric(float64((cpuTime()-settledCPU).Milliseconds())*perMinute, "settled-cpu-ms/min")
		b.ReportMetric(reconciles/float64(n), "reconciles/root")
		b.ReportMetric((hubReconciles(b)-settledReconciles)*perMinute, "settled-reconciles/min")
		b.Logf("the %d roots were created in %.1f s (%.0f a second)", n, createdIn.Seconds(), float64(n)/createdIn.Seconds())
		b.Logf("the hub's writes to its own cluster per root: %s", writesByKind(hubWrites, n))
		b.Logf("CPU per root of each cluster's API server and etcd: hub %.1f ms, member-a %.1f ms, member-b %.1f ms",
			perRoot(each["hub"]-eachBefore["hub"], n), perRoot(each["member-a"]-eachBefore["member-a"], n), perRoot(each["member-b"]-eachBefore["member-b"], n))
		load, _ := os.ReadFile("/proc/loadavg")
		b.Logf("%d roots x 2 members, GOMAXPROCS %d, load %s", n, runtime.GOMAXPROCS(0), strings.TrimSpace(string(load)))
	}
}

// hubReconciles returns how many reconciles the hub's root controller ran in this process so far
// (controller-runtime's controller_runtime_reconcile_total, every result).
func hubReconciles(b *testing.B) float64 {
	b.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(b, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "hub" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// childWatch records when each child was first seen on its member.
type childWatch struct {
	mu    sync.Mutex
	first map[string]time.Time // "member/child"
}

// watchChildren watches the namespace's MiniClusters on each member until the benchmark ends,
// and records when each child appeared.
func watchChildren(b *testing.B, ns string, ms ...*memberCluster) *childWatch {
	w := &childWatch{first: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for _, m := range ms {
		c, err := client.NewWithWatch(m.env.Config, client.Options{Scheme: m.env.Scheme})
		require.NoError(b, err)
		watcher, err := c.Watch(ctx, &fluxv1alpha2.MiniClusterList{}, client.InNamespace(ns))
		require.NoError(b, err)
		go func() {
			defer watcher.Stop()
			for e := range watcher.ResultChan() {
				if e.Type != watch.Added {
					continue
				}
				if obj, ok := e.Object.(client.Object); ok {
					w.mu.Lock()
					w.first[m.name+"/"+obj.GetName()] = time.Now()
					w.mu.Unlock()
				}
			}
		}()
	}
	return w
}

// latencies returns, for each root whose two children were both seen, the time from its
// creation to the later of them, and when the last of those was seen.
func (w *childWatch) latencies(n int, created []time.Time) ([]time.Duration, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	var last time.Time
	for i := range n {
		ta, okA := w.first[fmt.Sprintf("member-a/a-%03d", i)]
		tb, okB := w.first[fmt.Sprintf("member-b/b-%03d", i)]
		if !okA || !okB {
			continue
		}
		both := ta
		if tb.After(both) {
			both = tb
		}
		out = append(out, both.Sub(created[i]))
		if both.After(last) {
			last = both
		}
	}
	return out, last
}

// waitReported waits until every root reports both bursts, and returns how many ended Failed.
func waitReported(b *testing.B, f *federation, ns string, n int) int {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var roots fluxv1alpha2.MiniClusterList
		require.NoError(b, f.hub.Client.List(context.Background(), &roots, client.InNamespace(ns)))
		reported, failed := 0, 0
		for _, r := range roots.Items {
			settled := len(r.Status.Bursts) == 2
			for _, s := range r.Status.Bursts {
				switch s.Phase {
				case fluxv1alpha2.BurstFailed:
					failed++
				case fluxv1alpha2.BurstApplied, fluxv1alpha2.BurstReady, fluxv1alpha2.BurstJoined:
				default:
					settled = false
				}
			}
			if settled {
				reported++
			}
		}
		if reported == n || time.Now().After(deadline) {
			return failed
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cpuTime is the CPU this process used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// serversCPU is the CPU time so far of this process's children, the API servers and etcds
// envtest runs, by the cluster each serves (its API server's port in hosts), and in all.
func serversCPU(hosts map[string]string) (map[string]time.Duration, time.Duration) {
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	byPort := map[string]time.Duration{}
	etcdOf := map[string]string{} // etcd's client URL: the API server's port
	etcds := map[string]time.Duration{}
	var all time.Duration
	for _, p := range procs {
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 4, 14 and 15, counted after comm,
		// which may hold spaces.
		end := strings.LastIndexByte(string(stat), ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 13 || fields[1] != self {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		cpu := time.Duration(utime+stime) * time.Second / 100 // USER_HZ
		all += cpu
		cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		args := map[string]string{}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if k, v, ok := strings.Cut(arg, "="); ok {
				args[k] = v
			}
		}
		if port := args["--secure-port"]; port != "" {
			byPort[port] += cpu
			etcdOf[args["--etcd-servers"]] = port
		} else if url := args["--listen-client-urls"]; url != "" {
			etcds[url] += cpu
		}
	}
	for url, cpu := range etcds {
		byPort[etcdOf[url]] += cpu
	}
	out := map[string]time.Duration{}
	for name, port := range hosts {
		out[name] = byPort[port]
	}
	return out, all
}

// profileServers starts a CPU profile of 10 s of each API server of envs (by name) when
// -fluxfed.serverprofiles is set, and returns the function that waits for them to be written.
func profileServers(b *testing.B, envs map[string]*testenv.Env) func() {
	b.Helper()
	if *benchServerProfiles == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for name, env := range envs {
		c, err := rest.HTTPClientFor(env.Config)
		require.NoError(b, err)
		wg.Go(func() {
			resp, err := c.Get(strings.TrimSuffix(env.Config.Host, "/") + "/debug/pprof/profile?seconds=10")
			if err != nil {
				b.Errorf("profiling the API server of %s: %v", name, err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			out, err := os.Create(filepath.Join(*benchServerProfiles, name+".cpu"))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := io.Copy(out, resp.Body); err != nil {
				b.Errorf("profiling the API server of %s: %v", name, err)
			}
			if err := out.Close(); err != nil {
				b.Error(err)
			}
		})
	}
	return wg.Wait
}

// hostPorts returns the port of each cluster's API server, by name.
func hostPorts(b *testing.B, f *federation) map[string]string {
	b.Helper()
	ports := map[string]string{}
	for name, env := range map[string]*testenv.Env{"hub": f.hub, "member-a": f.members["member-a"].env, "member-b": f.members["member-b"].env} {
		u, err := url.Parse(env.Config.Host)
		require.NoError(b, err)
		ports[name] = u.Port()
	}
	return ports
}

func perRoot(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }

// writesByKind counts the writes ("POST /api/v1/namespaces/ns/services?...") by verb and
// resource, per root, most first.
func writesByKind(writes []string, roots int) string {
	counts := map[string]int{}
	for _, w := range writes {
		verb, path, _ := strings.Cut(w, " ")
		path, _, _ = strings.Cut(path, "?")
		parts := strings.Split(strings.Trim(path, "/"), "/")
		kind := ""
		for i, p := range parts {
			if p == "namespaces" && i+2 < len(parts) {
				kind = strings.Join(parts[i+2:], "/")
				break
			}
		}
		if kind == "" {
			kind = path
		}
		// Drop the object's name: miniclusters/root-001/status is miniclusters/status.
		if k := strings.Split(kind, "/"); len(k) >= 2 {
			kind = strings.Join(append(k[:1:1], k[2:]...), "/")
		}
		counts[verb+" "+kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(x, y string) int { return counts[y] - counts[x] })
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(roots)))
	}
	return strings.Join(out, ", ")
}

// peakRSS is this process's peak resident set, in bytes.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
