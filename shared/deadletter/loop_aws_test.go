package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/payments/resolvequeue"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/sqsqueue"
	"github.com/runtwice/twice/shared/stepfunctions"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// awsEnv is the AWS form of the retry loop: the tables on DynamoDB Local, the queues and the
// recovery state machine on moto, the functions' handlers as their mains wire them.
type awsEnv struct {
	store    *dynamo.Store
	table    *deadletter.Records
	relay    *outbox.Relay
	queues   map[string]*sqsqueue.Queue
	sfn      *sfn.Client
	machine  string
	provider *providertest.Fake
	steps    *recovery.Steps
	service  *payments.Service
	worker   *worker.Worker
	prefix   string
}

func newAWSEnv(t *testing.T) *awsEnv {
	t.Helper()
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	st := dynamo.New(db, map[string]string{
		deadletter.Table:     testenv.CreateTable(t, db, testenv.Schema{GSI1: true}),
		payments.Table:       testenv.CreateTable(t, db, testenv.Schema{GSI1: true}),
		payments.EventsTable: testenv.CreateTable(t, db, testenv.Schema{}),
		outbox.Table:         testenv.CreateTable(t, db, testenv.Schema{GSI1: true}),
		idempotency.Table:    testenv.CreateTable(t, db, testenv.Schema{}),
	})
	moto := testenv.MotoConfig(t)
	sq := sqs.NewFromConfig(moto)
	e := &awsEnv{store: st, queues: map[string]*sqsqueue.Queue{}, sfn: sfn.NewFromConfig(moto), provider: &providertest.Fake{Now: func() time.Time { return t0 }}}
	prefix := fmt.Sprintf("twice-loop-%d", time.Now().UnixNano())
	e.prefix = prefix
	for _, name := range []string{"webhooks", "resolve"} {
		q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-" + name)})
		if err != nil {
			t.Fatal(err)
		}
		e.queues[name] = &sqsqueue.Queue{Client: sq, URL: *q.QueueUrl}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Its one placeholder, filled as DefinitionSubstitutions fills it.
	def := bytes.ReplaceAll(raw, []byte("${RecoveryStepsFunctionArn}"), []byte("arn:aws:lambda:us-east-1:123456789012:function:recovery-steps"))
	m, err := e.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(prefix), Definition: aws.String(string(def)),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/payment-recovery")})
	if err != nil {
		t.Fatal(err)
	}
	e.machine = aws.ToString(m.StateMachineArn)
	quiet := slog.New(slog.DiscardHandler)
	now := func() time.Time { return t0 }
	// outbox-relay's requeuer (the queues by name, recovery on Step Functions, reconciliation
	// at the reconciler's next run), which sends the retries operator-api commits.
	queues := map[string]deadletter.Sender{}
	for name, q := range e.queues {
		queues[prefix+"-"+name] = q
	}
	requeue := deadletter.ByTarget{
		deadletter.TargetQueue: deadletter.QueueRequeuer{Queues: queues},
		deadletter.TargetRecovery: recovery.Requeuer{Store: st,
			Recoverer: &recovery.Recoverer{Starter: &stepfunctions.Starter{Client: e.sfn, StateMachineArn: e.machine}, Log: quiet}},
		deadletter.TargetReconcile: recon.RequeueAtNextRun{},
	}
	e.table = &deadletter.Records{Store: st, Now: now, Log: quiet}
	e.relay = &outbox.Relay{Store: st, Now: now, Log: quiet, Handlers: map[string]outbox.Handler{
		deadletter.KindRetry: (&deadletter.Records{Store: st, Requeuer: requeue, Now: now, Log: quiet}).RetryFollowOn()}}
	// recovery-steps, with the dead-letter sink it wires.
	e.steps, err = recovery.NewSteps(recovery.Steps{Provider: e.provider, Store: st, DeadLetters: recovery.DeadLetterRecords{Records: e.table},
		Now: now, Rand: rand.New(rand.NewPCG(1, 2)), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Now: now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.service = &payments.Service{Store: st, Keeper: keeper, Provider: e.provider, Now: now, Log: quiet}
	e.worker = &worker.Worker{Applier: &payments.Applier{Store: st, Classify: declines.ClassOf, Now: now, Log: quiet}}
	return e
}

// open opens the record deadletter-sink opens for a message that died on prefix-name's DLQ.
func (e *awsEnv) open(t *testing.T, name, id, body string) deadletter.Record {
	t.Helper()
	sink := &deadletter.Sink{Records: e.table, Now: func() time.Time { return t0 }}
	r, _, err := e.table.Open(context.Background(), sink.Record(queue.Message{ID: id, Body: []byte(body),
		Source: "arn:aws:sqs:us-east-1:123456789012:" + e.prefix + "-" + name + "-dlq", ReceiveCount: 5}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// doubleClick retries the record twice at once; exactly one retry is committed, and the relay
// delivers it.
func (e *awsEnv) doubleClick(t *testing.T, id string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 2 {
		wg.Go(func() {
			_, ok, err := e.table.Retry(context.Background(), id, "jwt:ops", "double click")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if ok {
				n++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if n != 1 {
		t.Fatalf("%d retries carried out, want 1", n)
	}
	e.deliver(t)
}

// deliver drains the outbox as the relay function does: every retry committed is sent (the
// steps' other follow-on work, the event feed's, has no handler here and stays).
func (e *awsEnv) deliver(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.relay.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	due, err := outbox.Undelivered(ctx, e.store, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range due {
		if m, err := outbox.Decode(it); err != nil || m.Kind == deadletter.KindRetry {
			t.Fatalf("a retry left in the outbox: %+v (%v)", m, err)
		}
	}
}

// consume polls the queue with the consumer the function's event source mapping stands for,
// the handler wrapped as its main wraps it, until the queue is empty; it returns how many
// messages the inner handler saw. Empty means several long polls in a row found nothing: a
// busy moto has answered two one-second polls empty with the relay's messages already sent.
func (e *awsEnv) consume(t *testing.T, name string, next func(context.Context, queue.Message) error) int {
	t.Helper()
	seen := 0
	counted := func(ctx context.Context, m queue.Message) error {
		seen++
		return next(ctx, m)
	}
	h := &deadletter.Retries{Loop: e.table, Now: func() time.Time { return t0 }, Done: "was processed", Failed: "failed"}
	c := &queue.Consumer{Queue: e.queues[name], Handler: (&sqsbatch.Batch{Each: counted, Report: h, Log: slog.New(slog.DiscardHandler)}).Handle, Wait: time.Second,
		Visibility: 30 * time.Second}
	for empty := 0; empty < 4; {
		res, err := c.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Received == 0 {
			empty++
		}
	}
	return seen
}

func (e *awsEnv) get(t *testing.T, id string) deadletter.Record {
	t.Helper()
	r, err := e.table.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ended(t *testing.T, r deadletter.Record, want deadletter.Status, attempts int) {
	t.Helper()
	last := r.Audit[len(r.Audit)-1]
	wantAction := deadletter.ActionRetrySucceeded
	if want == deadletter.StatusOpen {
		wantAction = deadletter.ActionRetryFailedAgain
	}
	if r.Status != want || len(r.Tries) != attempts || last.Action != wantAction || last.RetryID != deadletter.RetryID(r.ID, r.Retries) {
		t.Fatalf("record %s with %d attempts, last audit %+v; want %s with %d", r.Status, len(r.Tries), last, want, attempts)
	}
}

func TestRetriesCloseTheirLoopOnDynamoDBAndMoto(t *testing.T) {
	e := newAWSEnv(t)
	ctx := context.Background()

	t.Run("webhook queue", func(t *testing.T) {
		good := fmt.Sprintf(`{"id":"evt_aws_ok","object":"event","type":"customer.created","created":%d,"data":{"object":{"id":"cus_1","object":"customer"}}}`, t0.Unix())
		okBody, _ := json.Marshal(webhooks.Delivery{Provider: "stripe", EventID: "evt_aws_ok", Body: []byte(good)})
		badBody, _ := json.Marshal(webhooks.Delivery{Provider: "stripe", EventID: "evt_aws_bad", Body: []byte(`{"id":"evt_aws_bad"}`)})
		ok := e.open(t, "webhooks", "m-ok", string(okBody))
		bad := e.open(t, "webhooks", "m-bad", string(badBody))
		e.doubleClick(t, ok.ID)
		e.doubleClick(t, bad.ID)
		if n := e.consume(t, "webhooks", e.worker.Handle); n != 2 {
			t.Fatalf("the worker saw %d retried messages, want 2", n)
		}
		ended(t, e.get(t, ok.ID), deadletter.StatusResolved, 1)
		ended(t, e.get(t, bad.ID), deadletter.StatusOpen, 2)
		// SQS delivers at least once: the same retried message again is not worked again.
		resent := e.get(t, ok.ID)
		if _, err := e.queues["webhooks"].Send(ctx, okBody, queue.SendOptions{Attributes: deadletter.RetryAttributes(
			deadletter.Target{RecordID: resent.ID}, deadletter.RetryID(resent.ID, 1))}); err != nil {
			t.Fatal(err)
		}
		if n := e.consume(t, "webhooks", e.worker.Handle); n != 0 {
			t.Fatalf("a redelivered retry was worked %d times, want 0", n)
		}
	})

	t.Run("resolve queue", func(t *testing.T) {
		good, _ := json.Marshal(payments.ResolveJob{Scope: "jwt:c", Key: "k-gone", PaymentID: payments.PaymentID("jwt:c", "k-gone"), Attempt: 6})
		broken, _ := json.Marshal(payments.ResolveJob{Key: "k-broken", PaymentID: "pay_broken", Attempt: 6})
		ok := e.open(t, "resolve", "m-ok", string(good))
		bad := e.open(t, "resolve", "m-bad", string(broken))
		e.doubleClick(t, ok.ID)
		e.doubleClick(t, bad.ID)
		if n := e.consume(t, "resolve", resolvequeue.Consumer{Service: e.service}.Handle); n != 2 {
			t.Fatalf("the resolver saw %d retried jobs, want 2", n)
		}
		ended(t, e.get(t, ok.ID), deadletter.StatusResolved, 1)
		ended(t, e.get(t, bad.ID), deadletter.StatusOpen, 2)
	})

	t.Run("reconciliation run", func(t *testing.T) {
		// The schedule's own dead letter of a failed run: the input is the body.
		rec := e.open(t, "reconcile", "m-run", `{"scheduled_time":"2026-12-01T09:00:00Z"}`)
		if rec.Cause != deadletter.CauseReconRunFailed || rec.Target.Kind != deadletter.TargetReconcile {
			t.Fatalf("record %+v", rec)
		}
		// operator-api leaves it retrying; the reconciler's next run carries it out.
		e.doubleClick(t, rec.ID)
		if got := e.get(t, rec.ID); got.Status != deadletter.StatusRetrying {
			t.Fatalf("after the click: %s", got.Status)
		}
		var inputs []string
		fail := true
		run := func(_ context.Context, in json.RawMessage) (recon.Report, error) {
			inputs = append(inputs, string(in))
			if fail {
				return recon.Report{}, errors.New("provider down")
			}
			return recon.Report{RunID: "run-1"}, nil
		}
		pending := recon.PendingRetries{Records: e.table, Run: run}
		if n, err := pending.RunPending(ctx); err != nil || n != 1 {
			t.Fatalf("pending: %d %v", n, err)
		}
		ended(t, e.get(t, rec.ID), deadletter.StatusOpen, 2)
		// Nothing is pending now: a second scheduled run does not run it again.
		if n, err := pending.RunPending(ctx); err != nil || n != 0 || len(inputs) != 1 {
			t.Fatalf("pending again: %d %v, runs %v", n, err, inputs)
		}
		fail = false
		got := e.get(t, rec.ID)
		if _, ok, err := e.table.RetrySeen(ctx, rec.ID, "jwt:ops", "", got.Retries); err != nil || !ok {
			t.Fatalf("second retry: %v %v", ok, err)
		}
		e.deliver(t)
		if n, err := pending.RunPending(ctx); err != nil || n != 1 {
			t.Fatalf("pending: %d %v", n, err)
		}
		ended(t, e.get(t, rec.ID), deadletter.StatusResolved, 2)
		if len(inputs) != 2 || inputs[1] != `{"scheduled_time":"2026-12-01T09:00:00Z"}` {
			t.Fatalf("runs %v", inputs)
		}
	})

	for name, tc := range map[string]struct {
		id, pm string
		want   deadletter.Status
	}{
		// Ids that are not each other's prefix: the record is found by a text search.
		"recovery: the charge now succeeds":    {id: "pay_chargenow_ok", pm: "pm_card_visa", want: deadletter.StatusResolved},
		"recovery: the charge now is declined": {id: "pay_chargenow_declined", pm: "pm_card_visa_chargeDeclinedInsufficientFunds", want: deadletter.StatusOpen},
	} {
		t.Run(name, func(t *testing.T) {
			id := tc.id
			pi, err := e.provider.Create(ctx, provider.CreateRequest{Amount: 500, Currency: "usd", Customer: "cus_r", PaymentMethod: "pm_card_visa_chargeDeclinedInsufficientFunds",
				IdempotencyKey: "create-" + id})
			var dec *provider.DeclineError
			if err != nil && !errors.As(err, &dec) {
				t.Fatal(err)
			}
			if dec != nil {
				pi = dec.Payment
			}
			p := payments.Payment{ID: id, Status: provider.StatusDeclined, PaymentMethod: tc.pm, ProviderPaymentID: pi.ID,
				Decline: &provider.Decline{Code: "insufficient_funds"}, CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)}
			w, _ := p.Put()
			if err := e.store.Put(ctx, w.Table, *w.Put, w.Cond); err != nil {
				t.Fatal(err)
			}
			// Round 1 stopped (its schedule used up): the dead-letter step opened the record.
			stopped := recovery.State{PaymentID: id, Round: 1, Charges: []recovery.Charge{{At: t0.Add(-time.Hour), Result: recovery.ResultDeclined, Class: "insufficient_funds"}},
				Plan: &recovery.Plan{Attempt: 1, Reason: recovery.ReasonExhausted, Explanation: "Not retrying."}}
			step(t, e.steps, recovery.StepDeadLetter, stopped)
			recs, err := e.table.List(ctx, deadletter.Filter{Source: deadletter.SourceRecovery, Text: id})
			if err != nil || len(recs.Records) != 1 {
				t.Fatalf("records %v %v", recs.Records, err)
			}
			rec := recs.Records[0]
			e.doubleClick(t, rec.ID)
			// One execution on Step Functions, whose input links the record and charges now.
			list, err := e.sfn.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(e.machine)})
			if err != nil {
				t.Fatal(err)
			}
			var input string
			for _, x := range list.Executions {
				if strings.HasPrefix(aws.ToString(x.Name), id) {
					d, err := e.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: x.ExecutionArn})
					if err != nil {
						t.Fatal(err)
					}
					if input != "" {
						t.Fatalf("a second execution %s", aws.ToString(x.Name))
					}
					input = aws.ToString(d.Input)
				}
			}
			var st recovery.State
			if err := json.Unmarshal([]byte(input), &st); err != nil || st.ChargeNow == nil || st.Round != 2 || len(st.Charges) != 1 {
				t.Fatalf("execution input %s (%v)", input, err)
			}
			// The state machine's path, step by step: Plan, Charge, and DeadLetter after a decline.
			st = step(t, e.steps, recovery.StepPlan, st)
			if st.Plan == nil || !st.Plan.Retry || !st.Plan.At.Equal(t0) {
				t.Fatalf("charge now planned %+v", st.Plan)
			}
			st = step(t, e.steps, recovery.StepCharge, st)
			if st.Result != recovery.ResultSucceeded {
				step(t, e.steps, recovery.StepDeadLetter, st)
			}
			got := e.get(t, rec.ID)
			ended(t, got, tc.want, len(rec.Tries)+map[bool]int{true: 1}[tc.want == deadletter.StatusOpen])
			if n, _ := e.table.List(ctx, deadletter.Filter{Source: deadletter.SourceRecovery, Text: id}); len(n.Records) != map[bool]int{true: 1}[tc.want == deadletter.StatusOpen] {
				t.Fatalf("%d open records for %s: a new record was opened", len(n.Records), id)
			}
		})
	}
}

func step(t *testing.T, s *recovery.Steps, name string, st recovery.State) recovery.State {
	t.Helper()
	in, _ := json.Marshal(recovery.StepInput{Step: name, State: st, Now: t0})
	out, err := s.Handle(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if name == recovery.StepDeadLetter {
		return st
	}
	var next recovery.State
	if err := json.Unmarshal(out, &next); err != nil {
		t.Fatal(err)
	}
	return next
}
