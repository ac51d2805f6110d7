package inprocess

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/eventbus"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/store"
)

// Config.Throttle runs the stack as if AWS and the provider throttled that share of its calls.
// The local stand-ins are not AWS clients, so each wraps its calls as a client would: an attempt
// is refused with the service's own error (a smithy APIError with its code), and the retryer
// every function's clients use (lambdaenv.NewRetryer, through lambdaenv.Attempts) classifies it
// and retries with backoff, within the request's deadline and the retry quota. What outlasts the
// retries reaches the code above as it would in AWS, which hands the work back:
//
//	store (DynamoDB)           ProvisionedThroughputExceededException, as store.ErrThrottled
//	                           (the dynamo adapter's classification); a refused attempt applies
//	                           nothing
//	webhook and resolve queue  SQS RequestThrottled on Send
//	recovery starts            Step Functions ThrottlingException on StartExecution
//	event feed (EventBridge)   a PutEvents entry failed with ThrottlingException: an answer, not
//	                           retried by the SDK, so the outbox message stays due
//	provider                   the simulator's 429 rate_limit with Retry-After (ThrottleRate),
//	                           under the provider's own retry policy
//
// The stand-ins' own storage (queue messages, execution checkpoints) is the services'
// insides, not calls the system makes, and is never throttled.
type throttler struct {
	rate float64
	mu   sync.Mutex
	rnd  *rand.Rand
}

// throttleSeed makes the draws repeatable for one sequence of calls.
const throttleSeed = 0x7410771e

func newThrottler(rate float64) *throttler {
	return &throttler{rate: rate, rnd: rand.New(rand.NewPCG(throttleSeed, throttleSeed>>1|1))}
}

// hit draws whether this attempt is throttled.
func (t *throttler) hit() bool {
	if t == nil || t.rate <= 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rnd.Float64() < t.rate
}

// client is one stand-in's calls as an SDK client makes them: its own retryer (and so its own
// retry quota), each attempt throttled at the stack's rate with code.
type client struct {
	t       *throttler
	retryer aws.Retryer
	code    string
	msg     string
}

func (t *throttler) client(code, msg string) *client {
	return &client{t: t, retryer: lambdaenv.NewRetryer(lambdaenv.Retry{}), code: code, msg: msg}
}

// do runs call, attempt by attempt, under the retryer; a throttled attempt does not run call.
// call's own error is returned as it is, never retried here.
func (c *client) do(ctx context.Context, call func(context.Context) error) error {
	var callErr error
	err := lambdaenv.Attempts(ctx, c.retryer, func(ctx context.Context) error {
		if c.t.hit() {
			return &smithy.GenericAPIError{Code: c.code, Message: c.msg, Fault: smithy.FaultClient}
		}
		callErr = call(ctx)
		return nil
	})
	if err != nil {
		return &throttledError{err: err}
	}
	return callErr
}

// throttledError is a call the throttle outlasted, wrapping the SDK's *retry.MaxAttemptsError
// (or the retryer's refusal) around the service's error.
type throttledError struct{ err error }

func (e *throttledError) Error() string { return e.err.Error() }
func (e *throttledError) Unwrap() error { return e.err }

// throttledStore is the store behind DynamoDB's throughput limits. Its bbolt file (DB,
// Committer), which the queue and the runner's checkpoints share, is not throttled.
type throttledStore struct {
	localStore
	c *client
}

var _ localStore = (*throttledStore)(nil)

func newThrottledStore(next localStore, t *throttler) *throttledStore {
	return &throttledStore{localStore: next, c: t.client("ProvisionedThroughputExceededException",
		"The level of configured provisioned throughput for the table was exceeded.")}
}

// do runs call as the dynamo adapter's call: what the retries did not clear is
// store.ErrThrottled, as the adapter classifies it.
func (s *throttledStore) do(ctx context.Context, op string, call func(context.Context) error) error {
	err := s.c.do(ctx, call)
	var te *throttledError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: dynamo: %s: %w", store.ErrThrottled, op, te)
	}
	return err
}

func (s *throttledStore) Get(ctx context.Context, table, pk, sk string) (it store.Item, err error) {
	err = s.do(ctx, "GetItem", func(ctx context.Context) (err error) { it, err = s.localStore.Get(ctx, table, pk, sk); return err })
	return it, err
}

func (s *throttledStore) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	return s.do(ctx, "PutItem", func(ctx context.Context) error { return s.localStore.Put(ctx, table, it, c) })
}

func (s *throttledStore) Replace(ctx context.Context, table string, it store.Item, c store.Cond) (old *store.Item, err error) {
	err = s.do(ctx, "PutItem", func(ctx context.Context) (err error) { old, err = s.localStore.Replace(ctx, table, it, c); return err })
	return old, err
}

func (s *throttledStore) Transact(ctx context.Context, ws ...store.Write) error {
	return s.do(ctx, "TransactWriteItems", func(ctx context.Context) error { return s.localStore.Transact(ctx, ws...) })
}

func (s *throttledStore) PutAll(ctx context.Context, table string, items ...store.Item) error {
	return s.do(ctx, "BatchWriteItem", func(ctx context.Context) error { return s.localStore.PutAll(ctx, table, items...) })
}

func (s *throttledStore) Delete(ctx context.Context, table, pk, sk string, c store.Cond) error {
	return s.do(ctx, "DeleteItem", func(ctx context.Context) error { return s.localStore.Delete(ctx, table, pk, sk, c) })
}

func (s *throttledStore) Query(ctx context.Context, q store.Query) (p store.Page, err error) {
	err = s.do(ctx, "Query", func(ctx context.Context) (err error) { p, err = s.localStore.Query(ctx, q); return err })
	return p, err
}

// throttledQueue is a queue whose Send SQS throttles.
type throttledQueue struct {
	queue.Queue
	c *client
}

func (q *throttledQueue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (id string, err error) {
	err = q.c.do(ctx, func(ctx context.Context) (err error) { id, err = q.Queue.Send(ctx, body, opts); return err })
	var te *throttledError
	if errors.As(err, &te) {
		return "", fmt.Errorf("sqsqueue: send: %w", te)
	}
	return id, err
}

// throttledSink is the event feed with EventBridge's per-entry throttling: PutEvents answers,
// and the entry failed.
type throttledSink struct {
	feed.Sink
	t *throttler
}

func newThrottledSink(next feed.Sink, t *throttler) feed.Sink {
	if t.rate <= 0 {
		return next
	}
	return &throttledSink{Sink: next, t: t}
}

func (s *throttledSink) Publish(ctx context.Context, ev feed.Event, st store.Write) error {
	if s.t.hit() {
		return fmt.Errorf("%w: %s: ThrottlingException", eventbus.ErrRejected, ev.ID)
	}
	return s.Sink.Publish(ctx, ev, st)
}

// throttledStarter is StartExecution behind Step Functions' StartExecution quota.
type throttledStarter struct {
	next asl.ExecutionStarter
	c    *client
}

func newThrottledStarter(next asl.ExecutionStarter, t *throttler) asl.ExecutionStarter {
	if t.rate <= 0 {
		return next
	}
	return &throttledStarter{next: next, c: t.client("ThrottlingException", "Rate exceeded")}
}

func (s *throttledStarter) StartExecutionAt(ctx context.Context, machine, name string, input []byte, at time.Time) (ex asl.Execution, err error) {
	err = s.c.do(ctx, func(ctx context.Context) (err error) {
		ex, err = s.next.StartExecutionAt(ctx, machine, name, input, at)
		return err
	})
	var te *throttledError
	if errors.As(err, &te) {
		return asl.Execution{}, fmt.Errorf("stepfunctions: start %s: %w", name, te)
	}
	return ex, err
}

// throttled is q behind SQS's throttling when the stack is throttled.
func (s *Stack) throttled(q queue.Queue) queue.Queue {
	if s.cfg.Throttle <= 0 {
		return q
	}
	return &throttledQueue{Queue: q, c: s.throttle.client("RequestThrottled", "Request is throttled.")}
}
