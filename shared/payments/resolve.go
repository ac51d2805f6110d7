package payments

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/idempotency/idemlambda"
	"github.com/runtwice/twice/shared/queue"
)

// ResolveScope is the key prefix of the resolve queue's records (idemlambda.Config.KeyPrefix):
// the same in Lambda and locally.
const ResolveScope = "resolve-job"

// HandleResolve runs one message of the resolve queue, whose body is a JSON ResolveJob: the
// per-message func that sqsbatch runs for the payment-resolver function. The job runs under its
// own idempotency key (its message id, idemlambda.Message), so a redelivered message whose job
// completed is not run again. A job that fails (or does not decode) fails this message alone,
// so SQS retries it and, after the queue's maxReceiveCount, moves it to the dead-letter queue.
func (s *Service) HandleResolve(ctx context.Context, m queue.Message) error {
	h, err := idemlambda.Message(idemlambda.Config[struct{}]{Keeper: s.Keeper, KeyPrefix: ResolveScope, Log: s.log()}, s.resolveMessage)
	if err != nil {
		return err
	}
	return h(ctx, m)
}

func (s *Service) resolveMessage(ctx context.Context, m queue.Message) error {
	var job ResolveJob
	if err := json.Unmarshal(m.Body, &job); err != nil {
		return err
	}
	if job.Scope == "" || job.Key == "" || job.PaymentID == "" {
		return errors.New("payments: resolve job without scope, key or payment id")
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
