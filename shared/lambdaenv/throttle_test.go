package lambdaenv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/eventbus"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/sqsqueue"
	"github.com/runtwice/twice/shared/ssmparam"
	"github.com/runtwice/twice/shared/stepfunctions"
	"github.com/runtwice/twice/shared/store"
)

// The throttle tests put testenv.Throttle in front of DynamoDB Local and moto, so each adapter
// gets the service's own throttling answer through the SDK's own deserialiser and the retryer
// every function uses (lambdaenv.NewRetryer). For each path they check three things:
//   - a throttle that clears is retried and the work is done;
//   - a throttle that does not clear ends after RetryMaxAttempts calls, with waits drawn under
//     a growing full-jitter ceiling, and the work is handed back (an error to the caller), never
//     dropped;
//   - with the deadline nearer than RetryReserve no retry starts, and the call returns before
//     the deadline.

// speedup divides the waits the retryer asks for, so the test waits for a fiftieth of them: the
// waits themselves are recorded as the production backoff computed them.
const speedup = 50

// backoffLog is the production backoff (the standard retryer's own, with RetryMaxBackoff)
// recording each wait it draws.
type backoffLog struct {
	std      *retry.Standard
	mu       sync.Mutex
	attempts []int
	waits    []time.Duration
}

func (b *backoffLog) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, derr := b.std.RetryDelay(attempt, err)
	b.mu.Lock()
	b.attempts, b.waits = append(b.attempts, attempt), append(b.waits, d)
	b.mu.Unlock()
	return d / speedup, derr
}

type throttled struct {
	cfg     aws.Config
	th      *testenv.Throttle
	backoff *backoffLog
}

// throttle returns cfg with its calls going through a Throttle that throttles the calls pick
// says, and with the functions' retryer.
func throttle(cfg aws.Config, pick func(int, string) bool) throttled {
	th := &testenv.Throttle{Throttles: pick}
	b := &backoffLog{std: retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = lambdaenv.RetryMaxBackoff })}
	cfg.HTTPClient = th
	cfg.Retryer = func() aws.Retryer { return lambdaenv.NewRetryer(lambdaenv.Retry{Backoff: b}) }
	return throttled{cfg: cfg, th: th, backoff: b}
}

// checkRetried: the Throttle saw calls calls to target, throttled ones answered by a retry
// after a wait under the full-jitter ceiling of a throttle (1 s doubling, capped at
// RetryMaxBackoff), and the time between two calls was at least the wait: no tight loop.
func (x throttled) checkRetried(t *testing.T, target string, calls int) {
	t.Helper()
	var seen []testenv.Call
	for _, c := range x.th.Calls() {
		if c.Target == target {
			seen = append(seen, c)
		}
	}
	if len(seen) != calls {
		t.Fatalf("%d %s calls, want %d: %+v", len(seen), target, calls, seen)
	}
	x.backoff.mu.Lock()
	defer x.backoff.mu.Unlock()
	if len(x.backoff.waits) != calls-1 {
		t.Fatalf("%d waits for %d calls: %v", len(x.backoff.waits), calls, x.backoff.waits)
	}
	for i, w := range x.backoff.waits {
		ceiling := min(lambdaenv.RetryMaxBackoff, time.Second<<i)
		if x.backoff.attempts[i] != i+1 || w < 0 || w > ceiling {
			t.Fatalf("wait %d (after attempt %d) is %v, want within [0, %v]", i, x.backoff.attempts[i], w, ceiling)
		}
		if gap := seen[i+1].At.Sub(seen[i].At); gap < w/speedup {
			t.Fatalf("call %d came %v after the previous one; the retryer asked for %v", i+2, gap, w/speedup)
		}
	}
}

// nearDeadline is a context whose deadline is within RetryReserve.
func nearDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), lambdaenv.RetryReserve-time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkHandedBack: err is the service's throttling error with ErrDeadlineNear joined, after a
// single call, returned while the context could still be used to hand the work back.
func checkHandedBack(t *testing.T, ctx context.Context, x throttled, err error) {
	t.Helper()
	if !errors.Is(err, lambdaenv.ErrDeadlineNear) {
		t.Fatalf("err %v, want ErrDeadlineNear joined", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("returned after the deadline: %v", ctx.Err())
	}
	if n := len(x.th.Calls()); n != 1 {
		t.Fatalf("%d calls with the deadline near, want 1", n)
	}
}

func code(err error) string {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func TestDynamoDBThrottled(t *testing.T) {
	db := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, db, testenv.Schema{SortKey: true})
	newStore := func(x throttled) *dynamo.Store {
		return dynamo.New(dynamodb.NewFromConfig(x.cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }),
			map[string]string{"t": table})
	}
	plain := dynamo.New(db, map[string]string{"t": table})
	item := func(pk string) store.Item { return store.Item{PK: pk, SK: "s", Doc: []byte(`{"n":1}`), Version: 1} }

	t.Run("clears", func(t *testing.T) {
		x := throttle(testenv.DynamoDBConfig(t), testenv.FirstN(lambdaenv.RetryMaxAttempts-1))
		if err := newStore(x).Put(t.Context(), "t", item("clears"), store.Cond{Kind: store.Always}); err != nil {
			t.Fatal(err)
		}
		x.checkRetried(t, "DynamoDB_20120810.PutItem", lambdaenv.RetryMaxAttempts)
		if _, err := plain.Get(t.Context(), "t", "clears", "s"); err != nil {
			t.Fatalf("the write is not there: %v", err)
		}
	})
	t.Run("persists", func(t *testing.T) {
		x := throttle(testenv.DynamoDBConfig(t), testenv.Always)
		err := newStore(x).Put(t.Context(), "t", item("persists"), store.Cond{Kind: store.Always})
		var ce *dynamo.CallError
		if !errors.As(err, &ce) || (ce.Code != "ThrottlingException" && ce.Code != "ProvisionedThroughputExceededException") {
			t.Fatalf("err %v, want a CallError with DynamoDB's throttling code", err)
		}
		x.checkRetried(t, "DynamoDB_20120810.PutItem", lambdaenv.RetryMaxAttempts)
	})
	t.Run("deadline near", func(t *testing.T) {
		x := throttle(testenv.DynamoDBConfig(t), testenv.Always)
		ctx := nearDeadline(t)
		checkHandedBack(t, ctx, x, newStore(x).Put(ctx, "t", item("near"), store.Cond{Kind: store.Always}))
	})

	// PutAll (BatchWriteItem): DynamoDB writes part of a throttled batch and returns the rest
	// unprocessed; the store sends the rest again under the same retry policy.
	batch := func(prefix string, n int) []store.Item {
		its := make([]store.Item, n)
		for i := range its {
			its[i] = item(fmt.Sprintf("%s-%d", prefix, i))
		}
		return its
	}
	stored := func(t *testing.T, its []store.Item) (n int) {
		for _, it := range its {
			if _, err := plain.Get(t.Context(), "t", it.PK, it.SK); err == nil {
				n++
			}
		}
		return n
	}
	const batchTarget = "DynamoDB_20120810.BatchWriteItem"
	// A throttle that clears: partly unprocessed (one item written by each throttled call, the
	// rest by the last), or the whole call refused (the SDK's own retries).
	for _, partial := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch clears, partial %v", partial), func(t *testing.T) {
			x := throttle(testenv.DynamoDBConfig(t), testenv.FirstN(lambdaenv.RetryMaxAttempts-1))
			x.th.PartialBatchWrite = partial
			its := batch(fmt.Sprint("clears-", partial), lambdaenv.RetryMaxAttempts+2)
			if err := newStore(x).PutAll(t.Context(), "t", its...); err != nil {
				t.Fatal(err)
			}
			x.checkRetried(t, batchTarget, lambdaenv.RetryMaxAttempts)
			if n := stored(t, its); n != len(its) {
				t.Fatalf("%d of %d items stored", n, len(its))
			}
		})
	}
	// A throttle that persists ends after RetryMaxAttempts calls either way: what was written
	// stays written (one item a call when part of each is), and the caller hands back the rest
	// (and may send it all again: the puts are unconditional).
	for _, partial := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch persists, partial %v", partial), func(t *testing.T) {
			x := throttle(testenv.DynamoDBConfig(t), testenv.Always)
			x.th.PartialBatchWrite = partial
			its := batch(fmt.Sprint("persists-", partial), lambdaenv.RetryMaxAttempts+2)
			err := newStore(x).PutAll(t.Context(), "t", its...)
			if c := code(err); !errors.Is(err, store.ErrThrottled) || c != "ThrottlingException" && c != "ProvisionedThroughputExceededException" {
				t.Fatalf("err %v, want store.ErrThrottled with DynamoDB's throttling code", err)
			}
			x.checkRetried(t, batchTarget, lambdaenv.RetryMaxAttempts)
			want := 0
			if partial {
				want = lambdaenv.RetryMaxAttempts
			}
			if n := stored(t, its); n != want {
				t.Fatalf("%d of %d items stored, want %d", n, len(its), want)
			}
		})
	}
	t.Run("batch deadline near", func(t *testing.T) {
		x := throttle(testenv.DynamoDBConfig(t), testenv.Always)
		x.th.PartialBatchWrite = true
		ctx := nearDeadline(t)
		err := newStore(x).PutAll(ctx, "t", batch("near", 3)...)
		checkHandedBack(t, ctx, x, err)
		if !errors.Is(err, store.ErrThrottled) {
			t.Fatalf("err %v, want store.ErrThrottled", err)
		}
	})
}

func TestSQSThrottled(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	plain := sqs.NewFromConfig(cfg)
	name := fmt.Sprintf("twice-throttle-%d", time.Now().UnixNano())
	q, err := plain.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	queueOf := func(x throttled) *sqsqueue.Queue {
		return &sqsqueue.Queue{Client: sqs.NewFromConfig(x.cfg), URL: aws.ToString(q.QueueUrl)}
	}
	received := func() []string {
		out, err := plain.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		return bodies
	}

	t.Run("clears", func(t *testing.T) {
		x := throttle(cfg, testenv.FirstN(2))
		if _, err := queueOf(x).Send(t.Context(), []byte("clears"), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		x.checkRetried(t, "AmazonSQS.SendMessage", 3)
		if got := received(); fmt.Sprint(got) != "[clears]" {
			t.Fatalf("queue holds %v", got)
		}
	})
	t.Run("persists", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		_, err := queueOf(x).Send(t.Context(), []byte("persists"), queue.SendOptions{})
		if code(err) != "RequestThrottled" {
			t.Fatalf("err %v (code %q), want SQS's RequestThrottled", err, code(err))
		}
		x.checkRetried(t, "AmazonSQS.SendMessage", lambdaenv.RetryMaxAttempts)
	})
	t.Run("deadline near", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		ctx := nearDeadline(t)
		_, err := queueOf(x).Send(ctx, []byte("near"), queue.SendOptions{})
		checkHandedBack(t, ctx, x, err)
	})
}

func TestStepFunctionsThrottled(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	plain := sfn.NewFromConfig(cfg)
	m, err := plain.CreateStateMachine(t.Context(), &sfn.CreateStateMachineInput{
		Name:       aws.String(fmt.Sprintf("twice-throttle-%d", time.Now().UnixNano())),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/payment-recovery"),
	})
	if err != nil {
		t.Fatal(err)
	}
	starter := func(x throttled) *stepfunctions.Starter {
		return &stepfunctions.Starter{Client: sfn.NewFromConfig(x.cfg), StateMachineArn: aws.ToString(m.StateMachineArn)}
	}
	executions := func() []string {
		out, err := plain.ListExecutions(t.Context(), &sfn.ListExecutionsInput{StateMachineArn: m.StateMachineArn})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range out.Executions {
			names = append(names, aws.ToString(e.Name))
		}
		return names
	}

	t.Run("clears", func(t *testing.T) {
		x := throttle(cfg, testenv.FirstN(2))
		if err := starter(x).Start(t.Context(), "inv_clears-r1", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		x.checkRetried(t, "AWSStepFunctions.StartExecution", 3)
		if got := executions(); fmt.Sprint(got) != "[inv_clears-r1]" {
			t.Fatalf("executions %v", got)
		}
	})
	t.Run("persists", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		err := starter(x).Start(t.Context(), "inv_persists-r1", []byte(`{}`))
		if code(err) != "ThrottlingException" {
			t.Fatalf("err %v, want Step Functions' ThrottlingException", err)
		}
		x.checkRetried(t, "AWSStepFunctions.StartExecution", lambdaenv.RetryMaxAttempts)
	})
	t.Run("deadline near", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		ctx := nearDeadline(t)
		checkHandedBack(t, ctx, x, starter(x).Start(ctx, "inv_near-r1", []byte(`{}`)))
	})
}

// TestEventBridgeThrottled: a throttled PutEvents call is retried by the SDK; a PutEvents whose
// entries failed with ThrottlingException is an answer, not an error, so the SDK does not retry
// it: the outbox message that published it stays due and a later drain publishes it.
func TestEventBridgeThrottled(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	plain := eventbridge.NewFromConfig(cfg)
	bus := fmt.Sprintf("twice-throttle-%d", time.Now().UnixNano())
	if _, err := plain.CreateEventBus(t.Context(), &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2027, 3, 4, 5, 6, 7, 0, time.UTC)
	relayOf := func(t *testing.T, x throttled, c *clock.Fake) (*outbox.Relay, store.Store) {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		pub := &feed.Publisher{Store: st, Sink: &eventbus.Sink{API: eventbridge.NewFromConfig(x.cfg), Bus: bus, Store: st}}
		publish := func(ctx context.Context, m outbox.Message) error {
			return pub.Publish(ctx, m.ID, payments.Change{PaymentID: "pay_eb", Version: 10, At: t0,
				Payment: payments.View{ID: "pay_eb", Status: "succeeded", Amount: 2500, Currency: "usd"}})
		}
		w, err := outbox.New("publish", "change#pay_eb#10", struct{}{}, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Transact(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		return &outbox.Relay{Store: st, Handlers: map[string]outbox.Handler{"publish": publish}, Now: c.Now,
			Rand: rand.New(rand.NewPCG(1, 2))}, st
	}
	drainUntilDelivered := func(t *testing.T, r *outbox.Relay, c *clock.Fake) (failures int) {
		for range 20 {
			delivered, failed, err := r.Drain(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			failures += failed
			if delivered == 1 {
				return failures
			}
			c.Advance(time.Minute)
		}
		t.Fatal("the message was never delivered")
		return 0
	}

	t.Run("call throttled", func(t *testing.T) {
		x := throttle(cfg, testenv.FirstN(2))
		c := clock.NewFake(t0)
		r, _ := relayOf(t, x, c)
		if failures := drainUntilDelivered(t, r, c); failures != 0 {
			t.Fatalf("%d failed deliveries; the SDK should have retried the throttled call", failures)
		}
		x.checkRetried(t, "AWSEvents.PutEvents", 3)
	})
	t.Run("entries throttled", func(t *testing.T) {
		x := throttle(cfg, testenv.FirstN(1))
		x.th.PartialPutEvents = true
		c := clock.NewFake(t0)
		r, st := relayOf(t, x, c)
		if failures := drainUntilDelivered(t, r, c); failures != 1 {
			t.Fatalf("%d failed deliveries, want the one whose entry was throttled", failures)
		}
		// One call each drain, and no SDK retry: a 200 with failed entries is an answer.
		if calls, waits := len(x.th.Calls()), len(x.backoff.waits); calls != 2 || waits != 0 {
			t.Fatalf("%d PutEvents calls and %d SDK waits, want 2 and 0", calls, waits)
		}
		if _, err := st.Get(t.Context(), outbox.Table, "change#pay_eb#10", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the delivered message is still in the outbox: %v", err)
		}
	})
}

func TestSSMThrottled(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	name := "/twice-test/throttle-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	if _, err := ssm.NewFromConfig(cfg).PutParameter(t.Context(), &ssm.PutParameterInput{Name: aws.String(name),
		Value: aws.String("sk_test_x"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL_SSM", "")
	t.Setenv("AWS_ENDPOINT_URL", "")

	t.Run("clears", func(t *testing.T) {
		x := throttle(cfg, testenv.FirstN(2))
		v, err := ssmparam.New(x.cfg).Get(t.Context(), name)
		if err != nil || v != "sk_test_x" {
			t.Fatalf("Get = %q, %v", v, err)
		}
		x.checkRetried(t, "AmazonSSM.GetParameter", 3)
	})
	t.Run("persists", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		_, err := ssmparam.New(x.cfg).Get(t.Context(), name)
		if !errors.Is(err, secrets.ErrUnavailable) || code(err) != "ThrottlingException" {
			t.Fatalf("err %v, want ErrUnavailable with SSM's ThrottlingException", err)
		}
		x.checkRetried(t, "AmazonSSM.GetParameter", lambdaenv.RetryMaxAttempts)
	})
	t.Run("deadline near", func(t *testing.T) {
		x := throttle(cfg, testenv.Always)
		ctx := nearDeadline(t)
		_, err := ssmparam.New(x.cfg).Get(ctx, name)
		checkHandedBack(t, ctx, x, err)
	})
}
