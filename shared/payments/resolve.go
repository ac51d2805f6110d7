package payments

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/queue"
)

// ResolveScope is the key prefix of the resolve queue's records (resolvequeue, idemlambda.Config.KeyPrefix):
// the same in Lambda and locally.
const ResolveScope = "resolve-job"

// ResolveMessage runs one message of the resolve queue, whose body is a JSON ResolveJob. It
// is not idempotent by itself: the resolve queue's consumer (package resolvequeue) runs it under
// the message's own idempotency key. A job that does not decode, or names no scope, key or
// payment, is this message's error.
func (s *Service) ResolveMessage(ctx context.Context, m queue.Message) error {
	var job ResolveJob
	if err := json.Unmarshal(m.Body, &job); err != nil {
		return err
	}
	if job.Scope == "" || job.Key == "" || job.PaymentID == "" {
		return errors.New("payments: resolve job without scope, key or payment id")
	}
	if job.Cancel != "" {
		return s.AutoCancel(ctx, job.PaymentID, job.Cancel)
	}
	if job.Refund != "" {
		return s.ResolveRefund(ctx, job)
	}
	return s.Resolve(ctx, job)
}

// Sender is the one queue call QueueResolver makes; queue.Queue (SQS, the local queue)
// satisfies it.
type Sender interface {
	Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error)
}

// QueueResolver queues resolve jobs as JSON on a queue. The first waits Delay, so the provider
// has time to settle before the repeat; each later one waits Delay plus a full-jitter backoff
// that doubles per attempt up to MaxResolveDelay: resolution keeps going until the outcome is
// known, without hammering a provider that is down.
type QueueResolver struct {
	Queue Sender
	Delay time.Duration
	// Rand is the jitter source (default: seeded from the clock).
	Rand *rand.Rand

	mu sync.Mutex
}

// MaxResolveDelay is SQS's longest message delay.
const MaxResolveDelay = 15 * time.Minute

// delay is the wait before resolve attempt n (1 for the first).
func (r *QueueResolver) delay(n int) time.Duration {
	if n <= 1 {
		return r.Delay
	}
	ceiling := MaxResolveDelay
	if n < 40 {
		ceiling = min(MaxResolveDelay, max(r.Delay, time.Second)<<(n-1))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		r.Rand = rand.New(rand.NewPCG(seed, seed^0xa54ff53a5f1d36f1))
	}
	return min(MaxResolveDelay, r.Delay+time.Duration(r.Rand.Int64N(int64(ceiling)+1)))
}

var _ Resolver = (*QueueResolver)(nil)

// EnqueueResolve implements Resolver.
func (r *QueueResolver) EnqueueResolve(ctx context.Context, job ResolveJob) error {
	b, err := json.Marshal(job)
	if err != nil {
		return err
	}
	_, err = r.Queue.Send(ctx, b, queue.SendOptions{Delay: r.delay(job.Attempt)})
	return err
}
