package report

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/internal/text"
)

// recorded is what a recorder was asked to record, as the events API would get it.
type recorded struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorded) Eventf(_ runtime.Object, _ runtime.Object, eventType, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Type: eventType, Reason: reason, Action: action, Note: fmt.Sprintf(note, args...)})
}

func TestRecordSendsInOrderOnce(t *testing.T) {
	var q Events
	q.Add(corev1.EventTypeNormal, "Scaled", "Scale a", "burst %s to %d", "a", 3)
	q.Append(Event{Type: corev1.EventTypeWarning, Reason: "Failed", Action: "Scale", Note: "100%"})
	rec := &recorded{}
	q.Record(rec, &corev1.Pod{})
	require.Equal(t, []Event{
		{Type: corev1.EventTypeNormal, Reason: "Scaled", Action: "Scale a", Note: "burst a to 3"},
		// A note is not a format: a % in it stays as it is.
		{Type: corev1.EventTypeWarning, Reason: "Failed", Action: "Scale", Note: "100%"},
	}, rec.events)

	q.Record(rec, &corev1.Pod{})
	require.Len(t, rec.events, 2, "a recorded event is not sent again")
}

func TestRecordCutsToWhatTheAPIAccepts(t *testing.T) {
	var q Events
	long := strings.Repeat("é", text.MaxEventNote) // two bytes each
	q.Add(corev1.EventTypeWarning, strings.Repeat("R", 300), "DeleteChild "+strings.Repeat("m", 300), "%s", long)
	q.Add(corev1.EventTypeWarning, "Bad", "Bytes", "%s", "a\xffb")
	rec := &recorded{}
	q.Record(rec, &corev1.Pod{})

	e := rec.events[0]
	require.LessOrEqual(t, len(e.Note), text.MaxEventNote)
	require.LessOrEqual(t, len(e.Reason), text.MaxEventAction)
	require.LessOrEqual(t, len(e.Action), text.MaxEventAction)
	require.True(t, strings.HasSuffix(e.Note, "..."), e.Note[len(e.Note)-8:])
	require.True(t, strings.HasPrefix(e.Action, "DeleteChild mmm"))
	require.True(t, utf8.ValidString(e.Note), "cut on a rune boundary")
	require.Equal(t, "a\uFFFDb", rec.events[1].Note, "invalid bytes would not survive JSON as they are")
}

func TestEventsAcceptsConcurrentAdds(t *testing.T) {
	var q Events
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { q.Add(corev1.EventTypeNormal, "R", "A", "%d", i) })
	}
	wg.Wait()
	rec := &recorded{}
	q.Record(rec, &corev1.Pod{})
	require.Len(t, rec.events, 50)
}
