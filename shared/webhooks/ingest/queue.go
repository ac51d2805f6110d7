package ingest

import (
	"context"
	"encoding/json"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

// Sender is the one queue call QueueSink makes; queue.Queue (SQS, the local queue) satisfies it.
type Sender interface {
	Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error)
}

// QueueSink is the Queue that sends each verified delivery as one JSON message (the body the
// webhook worker decodes), with the provider as a message attribute.
type QueueSink struct{ Queue Sender }

var _ Queue = QueueSink{}

// Enqueue implements Queue.
func (s QueueSink) Enqueue(ctx context.Context, d webhooks.Delivery) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.Queue.Send(ctx, b, queue.SendOptions{Attributes: map[string]string{"provider": d.Provider}})
	return err
}
