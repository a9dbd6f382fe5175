package report

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/fluxfed/fluxfed/internal/text"
)

// Event is one event about the object a reconcile is for.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is one of the API's event or condition reasons.
	Reason string
	// Action is what the controller did. The events library folds events of the same reason
	// and action into one series, so an action names what it acted on when two events of one
	// reconcile could share the reason.
	Action string
	// Note is the human-readable message.
	Note string
}

// Events holds the events of one reconcile until the status they describe is written. Its
// zero value is ready to use, and it is safe for concurrent use (a reconcile fans out to
// members).
type Events struct {
	mu     sync.Mutex
	events []Event
}

// Add queues an event whose note is format with args.
func (q *Events) Add(eventType, reason, action, format string, args ...any) {
	q.Append(Event{Type: eventType, Reason: reason, Action: action, Note: fmt.Sprintf(format, args...)})
}

// Append queues events, after those already queued.
func (q *Events) Append(events ...Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, events...)
}

// Record sends the queued events about obj, in the order they were queued, and empties the
// queue. Reasons and actions are cut to what the events API accepts, notes too: the condition
// keeps a whole message.
func (q *Events) Record(recorder events.EventRecorder, obj runtime.Object) {
	q.mu.Lock()
	queued := q.events
	q.events = nil
	q.mu.Unlock()
	for _, e := range queued {
		recorder.Eventf(obj, nil, e.Type, text.Truncate(e.Reason, text.MaxEventAction), text.Truncate(e.Action, text.MaxEventAction),
			"%s", text.Truncate(e.Note, text.MaxEventNote))
	}
}
