package deadletter_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/queue"
)

type queueSends struct {
	bodies []string
	attrs  []map[string]string
}

func (q *queueSends) Send(_ context.Context, body []byte, opts queue.SendOptions) (string, error) {
	q.bodies = append(q.bodies, string(body))
	q.attrs = append(q.attrs, opts.Attributes)
	return "m1", nil
}

// The table the sinks and the operator use has no requeuer; the relay's table is a second
// literal on the same store with one, and each retry goes to the requeuer of its target's kind.
func TestOperatorTableRetriesByTargetKind(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "dl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC) }
	quiet := slog.New(slog.DiscardHandler)
	records := &deadletter.Records{Store: s, Now: now, Log: quiet}
	webhooks := &queueSends{}
	ops := &deadletter.Records{Store: s, Now: now, Log: quiet, Requeuer: deadletter.ByTarget{
		deadletter.TargetQueue: deadletter.QueueRequeuer{Queues: map[string]deadletter.Sender{"twice-webhooks": webhooks}},
	}}
	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{deadletter.KindRetry: ops.RetryFollowOn()}, Now: now, Log: quiet}
	deliver := func() {
		if _, _, err := relay.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}

	wh := webhookRecord("evt_by_target")
	wh.Target.Queue = "twice-webhooks-dlq"
	r, _, err := records.Open(ctx, wh)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := records.Open(ctx, deadletter.FromRecovery(deadletter.RecoveryDeadLetter{Key: "rec_by_target", PaymentID: "pay_1",
		Reason: "exhausted", Tries: []deadletter.Try{{At: now(), Error: "declined"}}}))
	if err != nil || rec.Target.Kind != deadletter.TargetRecovery {
		t.Fatalf("recovery record %+v %v", rec.Target, err)
	}

	got, ok, err := records.Retry(ctx, r.ID, "jwt:ops", "")
	deliver()
	if err != nil || !ok || got.Status != deadletter.StatusRetrying {
		t.Fatalf("queue retry: %v %v %s", ok, err, got.Status)
	}
	if len(webhooks.bodies) != 1 || webhooks.bodies[0] != string(wh.Target.Body) ||
		webhooks.attrs[0][deadletter.AttrRetryID] != deadletter.RetryID(r.ID, 1) || webhooks.attrs[0][deadletter.AttrRecordID] != r.ID {
		t.Fatalf("sent %v %v", webhooks.bodies, webhooks.attrs)
	}
	// No requeuer for recovery targets here: the retry is not sent and the record is open again.
	if _, ok, err := records.Retry(ctx, rec.ID, "jwt:ops", ""); err != nil || !ok {
		t.Fatalf("recovery retry: %v %v", ok, err)
	}
	deliver()
	if got, err := records.Get(ctx, rec.ID); err != nil || got.Status != deadletter.StatusOpen ||
		got.Audit[len(got.Audit)-1].Action != deadletter.ActionRetryError {
		t.Fatalf("recovery retry without its requeuer: %v %s", err, got.Status)
	}
	if err := (deadletter.ByTarget{}).Requeue(ctx, deadletter.Target{Kind: deadletter.TargetRecovery}, "rt"); !errors.Is(err, deadletter.ErrNotRetryable) {
		t.Fatalf("ByTarget without the kind: %v", err)
	}
}
