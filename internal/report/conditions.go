package report

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions describes the conditions a controller owns in a status, and the events their
// moves are worth. A condition moves when its status or its reason changes; a new message
// alone is no event.
type Conditions struct {
	// Types are the condition types the controller owns, in the order of their events.
	Types []string
	// Announce tells whether a move is worth an event, with before nil when the condition first
	// appears. Nil announces every move but a first appearance as False: nothing happened yet.
	Announce func(before *metav1.Condition, after metav1.Condition) bool
	// Warning tells whether a move is a Warning event. Nil warns when the condition is False.
	Warning func(metav1.Condition) bool
	// Action is the events' action. Empty is the condition type: two conditions may move for
	// the same reason, and the events library would fold their events into one series.
	Action string
}

// Changed reports whether an owned condition differs between the stored conditions and the
// computed ones, or is in only one of them.
func (k Conditions) Changed(stored, computed []metav1.Condition) bool {
	for _, t := range k.Types {
		old, c := meta.FindStatusCondition(stored, t), meta.FindStatusCondition(computed, t)
		if (old == nil) != (c == nil) || (c != nil && !equality.Semantic.DeepEqual(*old, *c)) {
			return true
		}
	}
	return false
}

// Moved returns the owned conditions of after that moved since before and are worth an event,
// in the order of Types.
func (k Conditions) Moved(before, after []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range k.Types {
		c := meta.FindStatusCondition(after, t)
		if c == nil {
			continue
		}
		old := meta.FindStatusCondition(before, t)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		if k.announce(old, *c) {
			out = append(out, *c)
		}
	}
	return out
}

func (k Conditions) announce(before *metav1.Condition, after metav1.Condition) bool {
	if k.Announce != nil {
		return k.Announce(before, after)
	}
	return before != nil || after.Status != metav1.ConditionFalse
}

// Events returns an event for each condition that moved from before to after (see Moved):
// its reason is the condition's, its note "Type=Status: message".
func (k Conditions) Events(before, after []metav1.Condition) []Event {
	var out []Event
	for _, c := range k.Moved(before, after) {
		eventType := corev1.EventTypeNormal
		if (k.Warning == nil && c.Status == metav1.ConditionFalse) || (k.Warning != nil && k.Warning(c)) {
			eventType = corev1.EventTypeWarning
		}
		action := k.Action
		if action == "" {
			action = c.Type
		}
		out = append(out, Event{Type: eventType, Reason: c.Reason, Action: action,
			Note: fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message)})
	}
	return out
}
