package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// DefaultUnreachableGrace is how long Add keeps waiting after the hub first reports the member
// Unreachable (which takes two failed health checks): one more of the hub's default health
// checks, in case the member was only slow.
const DefaultUnreachableGrace = 5 * time.Second

// progressEvery is how often the wait says it still waits when nothing changed.
const progressEvery = 15 * time.Second

// reasonCredentialsRefused is the Ready reason of a member that refuses the kubeconfig's
// credentials (401), as the hub reports it; spelt here so that the wait does not need the
// constant.
const reasonCredentialsRefused = "CredentialsRefused"

// undoReasons are the reasons of Ready=False whose cause lies in what Add registered (the
// address, the token, the kubeconfig, the cluster itself): the registration is undone, and
// running Add again, changed, is what fixes it. Any other Ready=False reason (a member that
// lacks something, such as fluxfed) is fixed on the member, and the hub then uses the
// registration as it is.
var undoReasons = []string{
	fedv1alpha1.ReasonUnreachable, fedv1alpha1.ReasonAccessDenied, reasonCredentialsRefused,
	fedv1alpha1.ReasonKubeconfigRefused, fedv1alpha1.ReasonKubeconfigNotFound, fedv1alpha1.ReasonDuplicateCluster,
}

// NotReadyError is returned (wrapped) by Add when the hub did not report the member Ready.
type NotReadyError struct {
	// Member is the member's name.
	Member string
	// Ready is the hub's last Ready condition; nil when the hub reported nothing.
	Ready *metav1.Condition
	// Others are the other conditions that were not True.
	Others []metav1.Condition
	// Final is true when the hub concluded that the member is not usable as registered (a
	// Ready=False); false when Add stopped waiting.
	Final bool
	// Waited is how long Add waited.
	Waited time.Duration
	// Server is the member's API server as the hub dials it.
	Server string
	// Kept says what was left registered, or undone, and what to do next.
	Kept string
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	switch {
	case e.Ready == nil:
		fmt.Fprintf(&b, "the hub reported nothing of member %s within %v: does the hub run (fluxfed manager --hub)?", e.Member, e.Waited.Round(time.Second))
	case e.Final:
		fmt.Fprintf(&b, "the hub cannot use member %s: Ready=%s %s: %s", e.Member, e.Ready.Status, e.Ready.Reason, e.Ready.Message)
		if hint := hintFor(e.Ready.Reason, e.Server); hint != "" {
			fmt.Fprintf(&b, "\n  what to do: %s", hint)
		}
	default:
		fmt.Fprintf(&b, "member %s is not Ready after %v: Ready=%s %s: %s", e.Member, e.Waited.Round(time.Second), e.Ready.Status, e.Ready.Reason, e.Ready.Message)
	}
	for _, c := range e.Others {
		fmt.Fprintf(&b, "\n  %s", describeCondition(c))
	}
	if e.Kept != "" {
		fmt.Fprintf(&b, "\n  %s", e.Kept)
	}
	return b.String()
}

// undo reports whether the registration should be undone: the hub found it unusable for a
// reason that only a new registration fixes.
func (e *NotReadyError) undo() bool {
	return e.Final && e.Ready != nil && slices.Contains(undoReasons, e.Ready.Reason)
}

// hintFor says what to do about a Ready=False reason.
func hintFor(reason, server string) string {
	switch reason {
	case fedv1alpha1.ReasonUnreachable:
		return fmt.Sprintf("the hub dials the member's API server at %s: if the hub reaches the member at another address, run member add again with --member-server URL; "+
			"else open the network from the hub to it, and check the hub's --dial-allow", server)
	case fedv1alpha1.ReasonAccessDenied, reasonCredentialsRefused:
		return "the member did not accept the token member add minted for the hub, or its role: check that the member's API server accepts its own service account tokens " +
			"(and, with --member-server, that this address is the same cluster), then run member add again"
	case fedv1alpha1.ReasonKubeconfigRefused, fedv1alpha1.ReasonKubeconfigNotFound:
		return "the hub's message says what it refuses in the kubeconfig member add built; fix that (--member-server), then run member add again"
	case fedv1alpha1.ReasonDuplicateCluster:
		return "this cluster is registered on the hub already, under the name the message gives: use that member, or remove it first (fluxfed member remove NAME)"
	}
	return "fix what the hub reports on the member: the hub checks it again every few seconds and uses it once it is fixed, without member add again"
}

// describeCondition prints a condition as `Type=Status Reason: message`.
func describeCondition(c metav1.Condition) string {
	s := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// notGood returns the conditions that are not True, Ready first: every condition of a
// MemberCluster has positive polarity.
func notGood(conds []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b metav1.Condition) int {
		switch {
		case a.Type == b.Type:
			return 0
		case a.Type == fedv1alpha1.ConditionReady:
			return -1
		case b.Type == fedv1alpha1.ConditionReady:
			return 1
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

// waiter waits for the hub to report a MemberCluster Ready, saying what it sees on the way.
type waiter struct {
	c       client.Client
	name    string
	server  string
	timeout time.Duration
	// grace is how long an Unreachable member is waited for before it is final.
	grace time.Duration
	p     printer
}

// wait polls the MemberCluster until Ready=True (returned), a Ready=False the hub will not
// change by itself, or the timeout; it prints every change of the conditions that are not True,
// and every progressEvery that it still waits.
func (w waiter) wait(ctx context.Context) (*fedv1alpha1.MemberCluster, error) {
	start := time.Now()
	deadline := start.Add(w.timeout)
	var (
		seen        = map[string]string{}
		unreachable time.Time
		said        = start
		last        *fedv1alpha1.MemberCluster
	)
	w.p.say("waiting up to %v for the hub to report it Ready", w.timeout)
	for {
		mc := &fedv1alpha1.MemberCluster{}
		getCtx, cancel := context.WithTimeout(ctx, DefaultReachTimeout)
		err := w.c.Get(getCtx, client.ObjectKey{Name: w.name}, mc)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			// The hub may be slow for a moment: say so, and keep the last view.
			if time.Since(said) >= progressEvery {
				w.p.say("reading MemberCluster %s on the hub: %v", w.name, err)
				said = time.Now()
			}
		default:
			last = mc
		}
		if last != nil {
			ready := meta.FindStatusCondition(last.Status.Conditions, fedv1alpha1.ConditionReady)
			// Each condition that is not True, when it first shows or changes.
			shown := map[string]bool{}
			for _, c := range notGood(last.Status.Conditions) {
				line := describeCondition(c)
				shown[c.Type] = true
				if seen[c.Type] != line {
					seen[c.Type] = line
					w.p.say("the hub reports %s", line)
					said = time.Now()
				}
			}
			for t := range seen {
				if !shown[t] {
					delete(seen, t)
				}
			}
			if ready == nil || ready.Reason != fedv1alpha1.ReasonUnreachable {
				unreachable = time.Time{}
			}
			switch {
			case ready == nil:
			case ready.Status == metav1.ConditionTrue:
				return last, nil
			case ready.Status == metav1.ConditionFalse && ready.Reason == fedv1alpha1.ReasonUnreachable:
				// Two health checks failed already; give the member one more chance.
				if unreachable.IsZero() {
					unreachable = time.Now()
				}
				if time.Since(unreachable) >= w.grace {
					return last, w.notReady(last, true, start)
				}
			case ready.Status == metav1.ConditionFalse:
				return last, w.notReady(last, true, start)
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				return nil, &NotReadyError{Member: w.name, Waited: time.Since(start), Server: w.server}
			}
			return last, w.notReady(last, false, start)
		}
		if time.Since(said) >= progressEvery {
			w.p.say("still waiting for Ready (%v)", time.Since(start).Round(time.Second))
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w waiter) notReady(mc *fedv1alpha1.MemberCluster, final bool, start time.Time) *NotReadyError {
	e := &NotReadyError{Member: w.name, Final: final, Waited: time.Since(start), Server: w.server}
	for _, c := range notGood(mc.Status.Conditions) {
		if c.Type == fedv1alpha1.ConditionReady {
			e.Ready = c.DeepCopy()
		} else {
			e.Others = append(e.Others, c)
		}
	}
	if e.Ready == nil {
		// Ready=True after all, or no Ready condition yet.
		e.Ready = meta.FindStatusCondition(mc.Status.Conditions, fedv1alpha1.ConditionReady)
	}
	if e.Ready == nil {
		e.Final = false
		return &NotReadyError{Member: w.name, Waited: e.Waited, Server: w.server}
	}
	return e
}

// IsNotReady reports whether err says that the hub did not report the member Ready.
func IsNotReady(err error) bool {
	var e *NotReadyError
	return errors.As(err, &e)
}
