package backfill

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// KindRequeue is the outbox kind of an event a backfill pass could not apply now; its payload
// is the webhooks.Delivery the worker consumes.
const KindRequeue = "requeue_event"

// RequeueID is the outbox id of a requeued event: one message per event, however many passes
// list it.
func RequeueID(eventID string) string { return "requeue_event#" + eventID }

// FollowOns returns the outbox relay's handler of KindRequeue: it sends the delivery to the
// webhook queue as ingest sends a verified webhook (ingest.QueueSink: the JSON delivery, the
// provider as a message attribute), so the worker takes it like any other delivery. A message
// delivered twice sends twice; the worker's dedupe on event id applies it once.
func FollowOns(webhookQueue ingest.Sender) map[string]outbox.Handler {
	sink := ingest.QueueSink{Queue: webhookQueue}
	return map[string]outbox.Handler{KindRequeue: func(ctx context.Context, m outbox.Message) error {
		var d webhooks.Delivery
		if err := json.Unmarshal(m.Payload, &d); err != nil || d.Provider == "" || d.EventID == "" {
			return fmt.Errorf("backfill: requeue %s: not a delivery", m.ID)
		}
		return sink.Enqueue(ctx, d)
	}}
}
