package report

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/require"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "why " + reason}
}

func conds(cs ...metav1.Condition) []metav1.Condition { return cs }

func TestMoved(t *testing.T) {
	plain := Conditions{Types: []string{"Ready", "Failed"}}
	// Like the MemberCluster's: Unknown is no news but for Ready, and a lack is told when found.
	picky := Conditions{Types: []string{"Ready", "Lacks"}, Announce: func(before *metav1.Condition, after metav1.Condition) bool {
		if after.Type == "Ready" {
			return before != nil || after.Status != metav1.ConditionUnknown
		}
		return after.Status != metav1.ConditionUnknown && (before != nil || after.Status == metav1.ConditionFalse)
	}}
	tests := []struct {
		name          string
		kit           Conditions
		before, after []metav1.Condition
		want          []string
	}{
		{name: "nothing", kit: plain},
		{name: "first appearance as False is no news", kit: plain,
			after: conds(cond("Ready", metav1.ConditionFalse, "Waiting"), cond("Failed", metav1.ConditionFalse, "Running"))},
		{name: "first appearance as True is news", kit: plain,
			after: conds(cond("Ready", metav1.ConditionTrue, "Up")), want: []string{"Ready"}},
		{name: "first appearance as Unknown is news by default", kit: plain,
			after: conds(cond("Ready", metav1.ConditionUnknown, "Checking")), want: []string{"Ready"}},
		{name: "status moved", kit: plain,
			before: conds(cond("Ready", metav1.ConditionFalse, "Waiting")), after: conds(cond("Ready", metav1.ConditionTrue, "Up")), want: []string{"Ready"}},
		{name: "reason moved", kit: plain,
			before: conds(cond("Ready", metav1.ConditionFalse, "Waiting")), after: conds(cond("Ready", metav1.ConditionFalse, "Done")), want: []string{"Ready"}},
		{name: "a new message alone is no news", kit: plain,
			before: conds(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up", Message: "3 of 3"}),
			after:  conds(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up", Message: "4 of 4"})},
		{name: "conditions of others are not ours", kit: plain,
			after: conds(cond("Bursting", metav1.ConditionTrue, "Applied"))},
		{name: "in the order of Types", kit: plain,
			after: conds(cond("Failed", metav1.ConditionTrue, "Broke"), cond("Ready", metav1.ConditionTrue, "Up")), want: []string{"Ready", "Failed"}},
		{name: "a gone condition is no event", kit: plain,
			before: conds(cond("Ready", metav1.ConditionTrue, "Up"))},
		{name: "announce: Ready from Unknown on is not news at first", kit: picky,
			after: conds(cond("Ready", metav1.ConditionUnknown, "Connecting"))},
		{name: "announce: Ready moving to Unknown is news", kit: picky,
			before: conds(cond("Ready", metav1.ConditionTrue, "Up")), after: conds(cond("Ready", metav1.ConditionUnknown, "Connecting")), want: []string{"Ready"}},
		{name: "announce: a lack found is news", kit: picky,
			after: conds(cond("Lacks", metav1.ConditionFalse, "Missing")), want: []string{"Lacks"}},
		{name: "announce: nothing lacking at first is no news", kit: picky,
			after: conds(cond("Lacks", metav1.ConditionTrue, "Present"))},
		{name: "announce: a lack fixed is news", kit: picky,
			before: conds(cond("Lacks", metav1.ConditionFalse, "Missing")), after: conds(cond("Lacks", metav1.ConditionTrue, "Present")), want: []string{"Lacks"}},
		{name: "announce: a lack turning Unknown is no news", kit: picky,
			before: conds(cond("Lacks", metav1.ConditionFalse, "Missing")), after: conds(cond("Lacks", metav1.ConditionUnknown, "Unreachable"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range tt.kit.Moved(tt.before, tt.after) {
				got = append(got, c.Type)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestChanged(t *testing.T) {
	kit := Conditions{Types: []string{"Ready"}}
	ready := cond("Ready", metav1.ConditionTrue, "Up")
	tests := []struct {
		name             string
		stored, computed []metav1.Condition
		want             bool
	}{
		{name: "both empty"},
		{name: "same", stored: conds(ready), computed: conds(ready)},
		{name: "new", computed: conds(ready), want: true},
		{name: "gone", stored: conds(ready), want: true},
		{name: "message", stored: conds(ready), computed: conds(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up", Message: "other"}), want: true},
		{name: "transition time", stored: conds(ready), computed: conds(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up",
			Message: ready.Message, LastTransitionTime: metav1.Unix(1, 0)}), want: true},
		{name: "others' conditions are not compared", stored: conds(ready, cond("Bursting", metav1.ConditionTrue, "Applied")), computed: conds(ready)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, kit.Changed(tt.stored, tt.computed))
		})
	}
}

func TestEvents(t *testing.T) {
	before := conds(cond("Ready", metav1.ConditionTrue, "Up"), cond("Failed", metav1.ConditionFalse, "Running"))
	after := conds(cond("Ready", metav1.ConditionFalse, "Down"), cond("Failed", metav1.ConditionTrue, "Broke"))

	byDefault := Conditions{Types: []string{"Ready", "Failed"}}
	require.Equal(t, []Event{
		{Type: corev1.EventTypeWarning, Reason: "Down", Action: "Ready", Note: "Ready=False: why Down"},
		{Type: corev1.EventTypeNormal, Reason: "Broke", Action: "Failed", Note: "Failed=True: why Broke"},
	}, byDefault.Events(before, after))

	failureWarns := Conditions{Types: []string{"Ready", "Failed"}, Action: "Check",
		Warning: func(c metav1.Condition) bool { return c.Type == "Failed" && c.Status == metav1.ConditionTrue }}
	require.Equal(t, []Event{
		{Type: corev1.EventTypeNormal, Reason: "Down", Action: "Check", Note: "Ready=False: why Down"},
		{Type: corev1.EventTypeWarning, Reason: "Broke", Action: "Check", Note: "Failed=True: why Broke"},
	}, failureWarns.Events(before, after))

	require.Empty(t, byDefault.Events(after, after))
}
