package deadletter_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/metrics"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

func sqsMessage(t *testing.T, id, dlq string, body any, receives int) queue.Message {
	t.Helper()
	b, ok := body.(string)
	if !ok {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		b = string(raw)
	}
	return queue.Message{ID: id, Body: []byte(b), Source: "arn:aws:sqs:eu-west-1:123456789012:" + dlq,
		ReceiveCount: receives, SentAt: time.UnixMilli(1796000000000)}
}

func TestSinkTurnsDeadMessagesIntoRecords(t *testing.T) {
	delivery := webhooks.Delivery{Provider: "stripe", EventID: "evt_sink", Body: []byte(`{"id":"evt_sink"}`)}
	job := payments.ResolveJob{Scope: "local", Key: "order-7", PaymentID: "pay_sink"}
	tests := map[string]struct {
		msg         func(t *testing.T) queue.Message
		wantSource  deadletter.Source
		wantClass   deadletter.Cause
		wantKey     string
		wantQueue   string
		wantPayment string
	}{
		"webhook": {func(t *testing.T) queue.Message { return sqsMessage(t, "m1", "twice-webhooks-dlq", delivery, 5) },
			deadletter.SourceWebhook, deadletter.CauseProcessing, "webhook:stripe:evt_sink", "twice-webhooks", ""},
		"resolve": {func(t *testing.T) queue.Message { return sqsMessage(t, "m2", "resolve-dlq", job, 3) },
			deadletter.SourceResolve, deadletter.CauseHTTPUnknown, "resolve:pay_sink", "resolve", "pay_sink"},
		"webhook without event id": {func(t *testing.T) queue.Message {
			return sqsMessage(t, "m3", "webhooks-dlq", webhooks.Delivery{Provider: "standard"}, 5)
		}, deadletter.SourceWebhook, deadletter.CauseValidation, "msg:m3", "webhooks", ""},
		"poison": {func(t *testing.T) queue.Message { return sqsMessage(t, "m4", "webhooks-dlq", "not json {", 5) },
			deadletter.SourceWebhook, deadletter.CausePoison, "msg:m4", "", ""},
		"unknown queue": {func(t *testing.T) queue.Message { return sqsMessage(t, "m5", "other-dlq", job, 1) },
			deadletter.SourceUnknown, deadletter.CausePoison, "msg:m5", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			sink := &deadletter.Sink{Records: e.table, Metrics: &deadletter.EMF{Out: &metrics.EMF{W: e.metrics}}, Count: e.table.OpenCount}
			msg := tc.msg(t)
			// The same dead message delivered twice (SQS is at least once) is one record.
			for i := 0; i < 2; i++ {
				if err := sink.Handle(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
			}
			p, _ := e.table.List(context.Background(), deadletter.Filter{})
			if len(p.Records) != 1 {
				t.Fatalf("%d records, want 1", len(p.Records))
			}
			r := p.Records[0]
			if r.Source != tc.wantSource || r.Cause != tc.wantClass || r.Key != tc.wantKey || r.Target.Queue != tc.wantQueue || r.PaymentID != tc.wantPayment {
				t.Errorf("got source %s class %s key %s queue %q payment %q", r.Source, r.Cause, r.Key, r.Target.Queue, r.PaymentID)
			}
			if len(r.Tries) != 1 || r.Tries[0].MessageID != msg.ID || r.Tries[0].ReceiveCount == 0 {
				t.Errorf("attempts %+v", r.Tries)
			}
			if !json.Valid(r.Payload) {
				t.Errorf("payload not kept as JSON: %s", r.Payload)
			}
			// The sink reads a resolve job's key through its own two-field view of payments.ResolveJob.
			if tc.wantSource == deadletter.SourceResolve && r.IdempotencyKey != job.Key {
				t.Errorf("idempotency key %q, the job's is %q", r.IdempotencyKey, job.Key)
			}
			if r.Target.Queue != "" && string(r.Target.Body) != string(msg.Body) {
				t.Errorf("retry body %s differs from the message %s", r.Target.Body, msg.Body)
			}
		})
	}
}

func TestSinkFailsTheMessageItCannotStore(t *testing.T) {
	e := newEnv(t)
	failing := openerFunc(func(ctx context.Context, r deadletter.Record) (deadletter.Record, bool, error) {
		if r.Key == "msg:bad" {
			return deadletter.Record{}, false, context.DeadlineExceeded
		}
		return e.table.Open(ctx, r)
	})
	sink := &deadletter.Sink{Records: failing}
	if err := sink.Handle(context.Background(), sqsMessage(t, "good", "webhooks-dlq", "x", 1)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Handle(context.Background(), sqsMessage(t, "bad", "webhooks-dlq", "y", 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a record that cannot be stored: %v", err)
	}
}

type openerFunc func(ctx context.Context, r deadletter.Record) (deadletter.Record, bool, error)

func (f openerFunc) Open(ctx context.Context, r deadletter.Record) (deadletter.Record, bool, error) {
	return f(ctx, r)
}

// A failed reconciliation run reaches the sink twice: as the reconciler's on-failure
// destination record and as the schedule's own dead letter. Both are one record about the run.
func TestSinkOpensOneRecordPerFailedReconciliationRun(t *testing.T) {
	e := newEnv(t)
	sink := &deadletter.Sink{Records: e.table, Metrics: &deadletter.EMF{Out: &metrics.EMF{W: e.metrics}}, Count: e.table.OpenCount}
	const run = "2026-11-29T08:00:00Z"
	destination := map[string]any{
		"version":         "1.0",
		"requestContext":  map[string]any{"requestId": "r-1", "condition": "RetriesExhausted", "approximateInvokeCount": 3},
		"requestPayload":  map[string]any{"scheduled_time": run},
		"responsePayload": map[string]any{"errorType": "Runtime.ExitError", "errorMessage": "provider list failed"},
	}
	scheduler := sqsMessage(t, "s1", "twice-prod-reconcile-dlq", map[string]any{"scheduled_time": run}, 1)
	msg := "target unreachable"
	scheduler.Attributes = map[string]string{"ERROR_MESSAGE": msg}
	batch := []queue.Message{sqsMessage(t, "d1", "twice-prod-reconcile-dlq", destination, 1), scheduler}
	for _, m := range batch {
		if err := sink.Handle(context.Background(), m); err != nil {
			t.Fatalf("handle %s: %v", m.ID, err)
		}
	}
	first := sink.Record(batch[0])
	second := sink.Record(batch[1])
	if first.Source != deadletter.SourceReconciliation || first.Cause != deadletter.CauseReconRunFailed ||
		first.Key != "reconcile:"+run || second.Key != first.Key || first.Target.Kind != deadletter.TargetReconcile {
		t.Fatalf("records %+v / %+v", first, second)
	}
	if first.Tries[0].Error != "Runtime.ExitError: provider list failed (RetriesExhausted)" || second.Tries[0].Error != msg {
		t.Fatalf("causes %q / %q", first.Tries[0].Error, second.Tries[0].Error)
	}
	if string(first.Payload) != `{"scheduled_time":"`+run+`"}` {
		t.Fatalf("payload %s", first.Payload)
	}
	rec, err := e.table.Get(context.Background(), deadletter.RecordID(deadletter.SourceReconciliation, first.Key))
	if err != nil || rec.Status != deadletter.StatusOpen || rec.Explanation == "" {
		t.Fatalf("stored %+v, %v", rec, err)
	}
	if n, err := e.table.OpenCount(context.Background()); err != nil || n != 1 {
		t.Fatalf("open count %d (%v), want 1", n, err)
	}
	// After the batch (sqsbatch.Batch.AfterBatch), the open count goes out as a metric.
	before := e.metrics.Len()
	sink.ReportOpen(context.Background())
	if got := e.metrics.String()[before:]; !strings.Contains(got, `"DeadLetterOpen":1`) {
		t.Fatalf("metric after the batch: %q", got)
	}
}

// The outbox relay's on-failure destination: Lambda's record of a stream batch becomes one
// record per batch, explained, not retryable by the console (the sweep redelivers the messages,
// which stay in the outbox table).
func TestOutboxBatchFailureBecomesARecord(t *testing.T) {
	s := &deadletter.Sink{}
	body := `{"requestContext":{"requestId":"r1","functionArn":"arn:aws:lambda:us-east-1:1:function:twice-dev-outbox-relay","condition":"RetryAttemptsExhausted","approximateInvokeCount":11},` +
		`"version":"1.0","timestamp":"2026-12-01T10:00:00.000Z","DDBStreamBatchInfo":{"shardId":"shardId-0001","startSequenceNumber":"100","endSequenceNumber":"109","batchSize":10,"streamArn":"arn:aws:dynamodb:us-east-1:1:table/twice-dev-outbox/stream/x"}}`
	r := s.Record(queue.Message{ID: "m1", Body: []byte(body), Source: "arn:aws:sqs:us-east-1:1:twice-dev-outbox-dlq", ReceiveCount: 1})
	if r.Source != deadletter.SourceOutbox || r.Cause != deadletter.CauseFollowOnUndelivered || r.Key != "outbox:shardId-0001:100-109" || r.Target.Retryable() {
		t.Fatalf("record %+v", r)
	}
	if text, _ := deadletter.Explain(r.Cause, r.Facts); !strings.Contains(text, "still in the outbox") {
		t.Fatalf("explanation %q", text)
	}
}
