// Package managermem measures the memory of the fluxfed manager as a process: the binary runs as
// the image runs it (fluxfed-manager, the MiniCluster operator alone, by default; `fluxfed
// manager` with -managermem.binaries=fluxfed) against a real API server while it reconciles
// 100, 300 and 1000 MiniClusters (size 4), and its peak RSS, file-backed and anonymous RSS, Go
// heap and CPU time are read from /proc and its metrics (issue 25: the manager at 100
// MiniClusters within the Flux Operator's 53.4 MiB, memory linear in MiniClusters). It has no
// code of its own; the benchmark is in its test.
//
// Run it with:
//
//	KUBEBUILDER_ASSETS=~/.cache/fluxfed/k8s/v1.36.3 ~/.cache/fluxfed/tools/loopback \
//	  go test ./tools/bench/managermem -run '^$' -bench Manager -benchtime 1x -timeout 60m
//
// -managermem.sizes, -managermem.binaries (fluxfed-manager, fluxfed, or another main,
// NAME=./PACKAGE, several to compare them in one run), -managermem.env (GOGC=50),
// -managermem.args (fluxfed's flags, --max-concurrent-reconciles=1) and -managermem.profiles
// (heap and CPU profiles) vary it.
//
// -managermem.fluxoperator=MANAGER,CRD measures the Flux Operator's manager beside fluxfed's
// (a binary built from its source, which no fluxfed build depends on, and its MiniCluster CRD,
// installed in place of fluxfed's on its API servers). Every run then creates the MiniClusters
// with one kubectl apply of a multi-document file (the same file for both, as the v1alpha2test
// builder writes them, which both CRDs accept) and ends when every one has its Job, headless
// Service and ConfigMaps, seen through watches; it reports that time, each MiniCluster's
// latency to its Job, the manager's requests (its own client-go count), how long kubectl apply
// took, and the memory and CPU above. kubectl apply also runs alone on a fresh API server of
// each CRD: the baseline of the slowdown. -managermem.busy=N runs N CPU-burning processes through
// every run.
//
// BenchmarkHubMemory measures the hub the same way: `fluxfed manager --hub` as a process against
// a hub and two members, with -managermem.roots roots (0 and 200) each bursting onto both (issue
// 25: the hub within 80 MiB + 0.1 MiB per root).
//
// The file-backed part of RSS depends on the page cache as much as on the binary: the kernel
// maps whole folios of a file around a page that faults, and the folios are as large as the
// writes that filled the cache allowed. The same binary written in one write is mapped whole
// (61 of 61 MiB on Linux 6.18), written in 32 KiB writes (as containerd unpacks a layer, and as
// the benchmark copies it before each run) about 41 MiB. Compare binaries within one run.
package managermem
