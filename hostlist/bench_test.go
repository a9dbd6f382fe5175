package hostlist

import (
	"fmt"
	"strconv"
	"testing"
)

var benchSizes = []int{100_000, 1_000_000}

// rangeHosts returns node0 .. node(n-1).
func rangeHosts(n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = "node" + strconv.Itoa(i)
	}
	return hosts
}

// mixedHosts returns n hosts in runs of up to 100 under four prefixes, one
// of them zero-padded, with a gap every 37 numbers and a login host between
// runs: about 1 range per 25 hosts.
func mixedHosts(n int) []string {
	prefixes := []string{"node", "gpu", "rack1-cn", "10.1.0."}
	hosts := make([]string, 0, n)
	for run := 0; len(hosts) < n; run++ {
		prefix := prefixes[run%len(prefixes)]
		for i := run * 150; i < run*150+100 && len(hosts) < n; i++ {
			switch {
			case i%37 == 36:
			case prefix == "gpu":
				hosts = append(hosts, fmt.Sprintf("gpu%07d", i))
			default:
				hosts = append(hosts, prefix+strconv.Itoa(i))
			}
		}
		if len(hosts) < n {
			hosts = append(hosts, "login"+strconv.Itoa(run%3))
		}
	}
	return hosts
}

type benchInput struct {
	name  string
	n     int
	hosts []string
	text  string
}

func benchInputs() []benchInput {
	var in []benchInput
	for _, n := range benchSizes {
		r, m := rangeHosts(n), mixedHosts(n)
		in = append(in,
			benchInput{name: fmt.Sprintf("range/%d", n), n: n, hosts: r, text: Compress(r)},
			benchInput{name: fmt.Sprintf("mixed/%d", n), n: n, hosts: m, text: Compress(m)},
		)
	}
	return in
}

func BenchmarkExpand(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hosts, err := Expand(in.text)
				if err != nil || len(hosts) != in.n {
					b.Fatalf("Expand: %d hosts, %v", len(hosts), err)
				}
			}
		})
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s := Compress(in.hosts); len(s) != len(in.text) {
					b.Fatalf("Compress gave %d bytes, want %d", len(s), len(in.text))
				}
			}
			b.ReportMetric(float64(len(in.text)), "out-bytes")
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(in.text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCount(b *testing.B) {
	for _, in := range benchInputs() {
		hl, err := Parse(in.text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if hl.Count() != in.n {
					b.Fatal("wrong count")
				}
			}
		})
	}
}

// BenchmarkNth and BenchmarkFind look up the last host: a walk over every
// range, none over the hosts.
func BenchmarkNth(b *testing.B) {
	for _, in := range benchInputs() {
		hl, err := Parse(in.text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if h, _ := hl.Nth(in.n - 1); h != in.hosts[in.n-1] {
					b.Fatalf("Nth gave %q", h)
				}
			}
			b.ReportMetric(float64(len(hl.ranges)), "ranges")
		})
	}
}

func BenchmarkFind(b *testing.B) {
	for _, in := range benchInputs() {
		hl, err := Parse(in.text)
		if err != nil {
			b.Fatal(err)
		}
		last := in.hosts[in.n-1]
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if hl.Find(last) < 0 {
					b.Fatal("not found")
				}
			}
		})
	}
}
