package hub

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/fluxfed/fluxfed/internal/text"
)

// eventQueue holds the events of one reconcile until the status they describe is written.
type eventQueue struct {
	mu     sync.Mutex
	events []queuedEvent
}

type queuedEvent struct {
	eventType, reason, action, message string
}

func (q *eventQueue) add(eventType, reason, action, format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, queuedEvent{eventType, reason, action, fmt.Sprintf(format, args...)})
}

// flush records the queued events on obj, their messages cut to what an event may hold.
func (q *eventQueue) flush(recorder events.EventRecorder, obj runtime.Object) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.events {
		recorder.Eventf(obj, nil, e.eventType, e.reason, e.action, "%s", text.Truncate(e.message, maxEventMessage))
	}
	q.events = nil
}

// The longest note and action the events API accepts.
const (
	maxEventMessage = text.MaxEventNote
	maxEventAction  = text.MaxEventAction
)
