package fluxsim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hostlist"
)

// Uptime is what flux uptime prints at now: the local time, the broker state and how long the
// instance ran (how long it waited for its quorum before it ran), its owner, depth and size,
// then how many ranks are drained and offline once it runs.
func (in *Instance) Uptime(now float64, loc *time.Location) string {
	state, since := "run", in.Start
	var extra string
	if in.Running() {
		if n := len(in.Drained); n > 0 {
			extra += fmt.Sprintf(",  %d drained", n)
		}
		if n := in.Size() - len(in.Online); n > 0 {
			extra += fmt.Sprintf(",  %d offline", n)
		}
	} else {
		state, since = "quorum", in.QuorumSince
	}
	clock := time.Unix(int64(now), 0).In(loc).Format("15:04:05")
	return fmt.Sprintf(" %s %s %s,  owner %s,  depth 0,  size %d%s\n", clock, state, fsd(now-since), in.Owner, in.Size(), extra)
}

// fsd formats seconds as Flux Standard Duration with two significant digits, as flux uptime
// does: "37s", "1.2m", "3.5h", "2d", and milliseconds below a tenth of a second.
func fsd(d float64) string {
	switch {
	case d < 0.1 && d != 0:
		return g2(d*1000) + "ms"
	case d < 60:
		return g2(d) + "s"
	case d < 3600:
		return g2(d/60) + "m"
	case d < 86400:
		return g2(d/3600) + "h"
	}
	return g2(d/86400) + "d"
}

// g2 is C's %.2g.
func g2(f float64) string { return strconv.FormatFloat(f, 'g', 2, 64) }

// rankState is a rank's state as flux resource status and drain name it.
func (in *Instance) rankState(r int, held map[int]bool) string {
	if _, drained := in.Drained[r]; drained {
		if held[r] {
			return "draining"
		}
		return "drained"
	}
	return "avail"
}

// statusOrder is the order in which flux resource status lists the states.
var statusOrder = []string{"avail", "draining", "drained"}

// ResourceStatus is what `flux resource status -n -o '{state} {up} {nnodes} {ranks}
// {nodelist}'` prints: one line per state, the online ranks of a state before its offline ones,
// which carry a '*'.
func (in *Instance) ResourceStatus() string {
	held := in.held()
	var b strings.Builder
	for _, state := range statusOrder {
		for _, online := range []bool{true, false} {
			var ranks []int
			for r := range in.Hosts {
				if in.rankState(r, held) == state && slices.Contains(in.Online, r) == online {
					ranks = append(ranks, r)
				}
			}
			if len(ranks) == 0 {
				continue
			}
			name, up := state, "✔"
			if !online {
				name, up = state+"*", "✗"
			}
			fmt.Fprintf(&b, "%s %s %d %s %s\n", name, up, len(ranks), flux.FormatIDSet(ranks, false), in.nodelist(ranks))
		}
	}
	return b.String()
}

// DrainList is what `flux resource drain -n -o '{timestamp} {state} {ranks} {nodelist}
// {reason}'` prints: a line for each drained ranks that share their time, reason and state,
// by first rank.
func (in *Instance) DrainList() string {
	held := in.held()
	type key struct {
		time   float64
		reason string
		state  string
	}
	groups := map[key][]int{}
	var keys []key
	for r := range in.Hosts {
		d, ok := in.Drained[r]
		if !ok {
			continue
		}
		k := key{d.Time, d.Reason, in.rankState(r, held)}
		if !slices.Contains(in.Online, r) {
			k.state += "*"
		}
		if _, seen := groups[k]; !seen {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	for _, k := range keys {
		ranks := groups[k]
		fmt.Fprintf(&b, "%s %s %s %s %s\n", pyFloat(k.time), k.state, flux.FormatIDSet(ranks, false), in.nodelist(ranks), k.reason)
	}
	return b.String()
}

func (in *Instance) nodelist(ranks []int) string {
	hosts := make([]string, len(ranks))
	for i, r := range ranks {
		hosts[i] = in.Hosts[r]
	}
	return hostlist.Compress(hosts)
}

// pyFloat writes f as Python's repr does for the magnitudes Flux prints (times, durations):
// the shortest digits that read back as f, with ".0" when there is no fraction.
func pyFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// f58 encodes a job ID as flux jobs prints it: 'ƒ' and the ID in base 58.
func f58(id uint64) string {
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	if id == 0 {
		return "ƒ1"
	}
	var digits []byte
	for ; id > 0; id /= 58 {
		digits = append(digits, alphabet[id%58])
	}
	slices.Reverse(digits)
	return "ƒ" + string(digits)
}
