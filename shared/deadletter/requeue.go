package deadletter

import (
	"context"
	"fmt"
	"strings"

	"github.com/runtwice/twice/shared/queue"
)

// ByTarget is the Requeuer made of one Requeuer per target kind: a retry goes to the one for
// its Target.Kind. A kind without one is not retryable here (ErrNotRetryable). The producers
// of records provide theirs (recovery.Requeuer, recon.Requeuer); QueueRequeuer is the queues'.
type ByTarget map[TargetKind]Requeuer

// Requeue implements Requeuer.
func (b ByTarget) Requeue(ctx context.Context, t Target, retryID string) error {
	r, ok := b[t.Kind]
	if !ok || r == nil {
		return fmt.Errorf("%w: no retry for target %q", ErrNotRetryable, t.Kind)
	}
	return r.Requeue(ctx, t, retryID)
}

// Sender is the one queue call QueueRequeuer makes; sqsqueue.Queue and the local queue
// satisfy it.
type Sender interface {
	Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error)
}

// QueueRequeuer sends a dead message back to the queue it died on: the dead-letter queue's
// name without "-dlq". The retry carries RetryAttributes, so its consumer (Retries) dedupes on
// the retry id and closes the record's loop.
type QueueRequeuer struct {
	Queues map[string]Sender // by queue name, e.g. "twice-prod-webhooks"
}

// Requeue implements Requeuer for TargetQueue.
func (q QueueRequeuer) Requeue(ctx context.Context, t Target, retryID string) error {
	if t.Kind != TargetQueue {
		return fmt.Errorf("%w: %q is not a queue target", ErrNotRetryable, t.Kind)
	}
	dst, ok := q.Queues[strings.TrimSuffix(t.Queue, "-dlq")]
	if !ok {
		// Permanent: the queues are fixed when the table is built.
		return fmt.Errorf("%w: no queue %q to retry into", ErrNotRetryable, t.Queue)
	}
	_, err := dst.Send(ctx, t.Body, queue.SendOptions{Attributes: RetryAttributes(t, retryID)})
	return err
}
