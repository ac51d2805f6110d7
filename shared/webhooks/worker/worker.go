package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

// Worker takes the webhook queue's deliveries to the Applier.
type Worker struct {
	// Applier applies each delivery's event: dedupe, the ordering guard, the state change and
	// its follow-on work, in one transaction.
	Applier *payments.Applier
}

// Handle applies one message of the webhook queue, whose body is a JSON webhooks.Delivery: the
// per-message func that sqsbatch runs for the webhook-worker function. An error (a body that does
// not decode, a payment not stored yet, a failed commit) fails this message alone, so SQS
// delivers it again.
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	var d webhooks.Delivery
	if err := json.Unmarshal(m.Body, &d); err != nil {
		return fmt.Errorf("worker: delivery: %w", err)
	}
	_, err := w.Apply(ctx, d)
	return err
}

// Apply decodes one delivery and applies its event.
func (w *Worker) Apply(ctx context.Context, d webhooks.Delivery) (payments.Effect, error) {
	ev, err := webhooks.Decode(d)
	if err != nil {
		return "", err
	}
	return w.Applier.Apply(ctx, ev)
}
