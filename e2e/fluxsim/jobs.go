package fluxsim

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxfed/fluxfed/flux"
)

// Listed reports whether flux jobs -f pending,running lists j.
func (j *Job) Listed() bool { return j.State != StateInactive }

// JobsJSON is what `flux jobs -A --json -f pending,running` prints at now, with user the name
// of the instance's user: the pending jobs first, oldest first, then the running ones, the most
// recently started first, each with the fields flux-core 0.88.0 gives a job in that state, in
// its order.
func (in *Instance) JobsJSON(now float64, user string) string {
	var pending, running []*Job
	for i := range in.Jobs {
		j := &in.Jobs[i]
		switch j.State {
		case StateSched:
			pending = append(pending, j)
		case StateRun, StateCleanup:
			running = append(running, j)
		}
	}
	slices.SortStableFunc(running, func(a, b *Job) int {
		switch {
		case a.TRun > b.TRun:
			return -1
		case a.TRun < b.TRun:
			return 1
		}
		return 0
	})
	var b strings.Builder
	b.WriteString(`{"jobs": [`)
	for i, j := range append(pending, running...) {
		if i > 0 {
			b.WriteString(", ")
		}
		in.writeJob(&b, j, now, user)
	}
	b.WriteString("]}\n")
	return b.String()
}

// object writes a JSON object as Python's json module does: ", " and ": " between items.
type object struct {
	b     *strings.Builder
	first bool
}

func (o *object) key(k string) {
	if !o.first {
		o.b.WriteString(", ")
	}
	o.first = false
	o.b.WriteString(quote(k) + ": ")
}

func (o *object) raw(k, v string)         { o.key(k); o.b.WriteString(v) }
func (o *object) str(k, v string)         { o.raw(k, quote(v)) }
func (o *object) num(k string, v int)     { o.raw(k, strconv.Itoa(v)) }
func (o *object) flt(k string, v float64) { o.raw(k, pyFloat(v)) }

// quote writes s as a JSON string with every non-ASCII character escaped, as Python does by
// default (ensure_ascii).
func quote(s string) string {
	data, _ := json.Marshal(s) // a string always marshals
	var b strings.Builder
	for _, r := range string(data) {
		if r < 0x80 {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16(r) {
			b.WriteString(`\u` + strconv.FormatInt(int64(u)|0x10000, 16)[1:])
		}
	}
	return b.String()
}

// utf16 returns the UTF-16 code units of r.
func utf16(r rune) []rune {
	if r < 0x10000 {
		return []rune{r}
	}
	r -= 0x10000
	return []rune{0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff}
}

func (in *Instance) writeJob(b *strings.Builder, j *Job, now float64, user string) {
	b.WriteString("{")
	o := &object{b: b, first: true}
	o.flt("t_depend", j.TDepend)
	o.flt("t_priority", j.TPriority)
	o.flt("t_sched", j.TSched)
	started := j.State == StateRun || j.State == StateCleanup
	if started {
		o.flt("t_run", j.TRun)
	}
	if j.State == StateCleanup {
		o.flt("t_cleanup", j.TCleanup)
	}
	o.flt("duration", 0)
	o.str("name", j.Name)
	o.str("cwd", j.Cwd)
	o.num("ntasks", j.NTasks)
	switch {
	case started:
		o.num("ncores", len(j.Ranks)*len(j.cores(in.Cores)))
	case j.TasksGiven:
		o.num("ncores", j.NTasks)
	}
	o.num("nnodes", j.NNodes)
	o.num("priority", 16)
	if started {
		o.str("ranks", flux.FormatIDSet(j.Ranks, true))
		o.str("nodelist", in.nodelist(j.Ranks))
	}
	o.raw("id", strconv.FormatUint(j.ID, 10))
	o.flt("t_submit", j.TSubmit)
	o.str("state", j.State)
	o.str("username", user)
	o.num("userid", in.UserID)
	o.num("urgency", 16)
	switch j.State {
	case StateRun:
		o.flt("runtime", now-j.TRun)
	case StateCleanup:
		o.flt("runtime", j.TCleanup-j.TRun)
	}
	o.str("status", j.State)
	o.raw("dependencies", "[]")
	o.str("jobid", f58(j.ID))
	if started {
		o.raw("annotations", `{"sched": {"resource_summary": `+quote("rank"+flux.FormatIDSet(j.Ranks, true)+"/core"+flux.FormatIDSet(j.cores(in.Cores), true))+"}}")
	} else {
		o.raw("annotations", "{}")
	}
	o.raw("exception", `{"occurred": false}`)
	b.WriteString("}")
}

// cores are the cores a running job holds on each of its ranks: one per task when it asked for
// tasks, else the whole node, as sched-simple allocates -N without -n.
func (j *Job) cores(perRank int) []int {
	n := perRank
	if j.TasksGiven {
		n = min((j.NTasks+j.NNodes-1)/j.NNodes, perRank)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
