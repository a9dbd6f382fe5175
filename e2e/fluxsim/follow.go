package fluxsim

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/fluxfed/fluxfed/flux"
)

// FollowPoll is how often the stand-in's follower looks for a change of its instance: whether
// the instance's file changed, or a job's end is due.
const FollowPoll = 100 * time.Millisecond

// Changes returns the lines real Flux's follower (flux.FollowCommand) prints while the instance
// goes from before to after, both advanced to their time: "resource offline" and "resource
// online" when ranks left or joined, "resource drain" and "resource undrain" when ranks were
// drained (or given another reason) or undrained, then, job by job in submission order, "job
// priority" when it came to wait for resources, "job alloc" when it got them, and "job free" and
// "job clean" when it ended ("job clean" alone for one that never ran). A job that lost a rank
// tells nothing until it ends. Real Flux may tell one rank's change in a line of its own where
// the stand-in tells the change of many in one, and interleaves the lines of jobs that change at
// one instant in the order its modules chose: the lines of each job, and which lines, are what it
// prints.
func Changes(before, after *Instance) []string {
	var out []string
	gone, joined := diff(before.Online, after.Online)
	if len(gone) > 0 {
		out = append(out, "resource offline")
	}
	if len(joined) > 0 {
		out = append(out, "resource online")
	}
	drained, undrained := false, false
	for r, d := range after.Drained {
		if old, ok := before.Drained[r]; !ok || old.Reason != d.Reason {
			drained = true
		}
	}
	for r := range before.Drained {
		if _, ok := after.Drained[r]; !ok {
			undrained = true
		}
	}
	if drained {
		out = append(out, "resource drain")
	}
	if undrained {
		out = append(out, "resource undrain")
	}
	for i, j := range after.Jobs {
		state := ""
		if i < len(before.Jobs) {
			state = before.Jobs[i].State
		}
		out = append(out, jobSteps(state, j)...)
	}
	return out
}

// diff returns the ranks of a not in b, and those of b not in a.
func diff(a, b []int) (onlyA, onlyB []int) {
	for _, r := range a {
		if !slices.Contains(b, r) {
			onlyA = append(onlyA, r)
		}
	}
	for _, r := range b {
		if !slices.Contains(a, r) {
			onlyB = append(onlyB, r)
		}
	}
	return onlyA, onlyB
}

// jobSteps returns the lines of job j, from state from ("" before it was submitted) to its own.
func jobSteps(from string, j Job) []string {
	order := map[string]int{"": 0, StateSched: 1, StateRun: 2, StateCleanup: 3, StateInactive: 4}
	var out []string
	if order[from] < 1 && order[j.State] >= 1 {
		out = append(out, "job priority")
	}
	ran := j.TRun != 0
	if order[from] < 2 && order[j.State] >= 2 && ran {
		out = append(out, "job alloc")
	}
	if order[from] < 4 && j.State == StateInactive {
		if ran {
			out = append(out, "job free")
		}
		out = append(out, "job clean")
	}
	return out
}

// Follow is the stand-in's flux.FollowCommand on the instance of dir: it prints
// flux.FollowReady, then the lines of Changes for every change it sees, looking every
// FollowPoll, until ctx ends or stdout fails. It fails at once, as real Flux's does, when no
// broker runs yet.
func Follow(ctx context.Context, dir string, stdout io.Writer) error {
	last, err := snapshot(dir)
	if err != nil {
		return err
	}
	if last.Size() == 0 || !slices.Contains(last.Online, 0) {
		return errNoInstance
	}
	if _, err := fmt.Fprintln(stdout, flux.FollowReady); err != nil {
		return err
	}
	stamp := fileStamp(dir)
	tick := time.NewTicker(FollowPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now := Now()
		s := fileStamp(dir)
		if s == stamp && now < nextChange(last) {
			continue
		}
		stamp = s
		cur, err := snapshot(dir)
		if err != nil {
			return err
		}
		for _, line := range Changes(last, cur) {
			if _, err := fmt.Fprintln(stdout, line); err != nil {
				return err
			}
		}
		last = cur
	}
}

// snapshot reads the instance of dir, advanced to now, without writing it.
func snapshot(dir string) (*Instance, error) {
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	in, err := read(dir)
	unlock()
	if err != nil {
		return nil, err
	}
	in.Advance(Now())
	return in, nil
}

// nextChange is when the next job of in ends by itself; +Inf when none runs.
func nextChange(in *Instance) float64 {
	j, at := in.nextEnd()
	if j == nil {
		return math.Inf(1)
	}
	return at
}

// fileStamp tells the instance file of dir apart from its earlier versions: every change
// replaces it (write renames a new file over it).
func fileStamp(dir string) string {
	info, err := os.Stat(filepath.Join(dir, stateFile))
	if err != nil {
		return ""
	}
	var ino uint64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprint(info.ModTime().UnixNano(), info.Size(), ino)
}

// follow runs Follow for Main, until stdout is gone, and returns its exit status.
func follow(dir string, stdout, stderr io.Writer) int {
	err := Follow(context.Background(), dir, stdout)
	fmt.Fprintf(stderr, "flux-python: ERROR: %v\n", err)
	return 1
}
