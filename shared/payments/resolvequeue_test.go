package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/payments/resolvequeue"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
)

// The resolve queue's consumer (package resolvequeue) on the payments fixture (export_test.go).

// The resolve queue's consumer fails each bad job alone; a job that cannot be parsed, or names no key, never
// reaches the provider, and its message record is released (a redelivery runs it again).
func TestResolveQueueReportsEachFailure(t *testing.T) {
	f := payments.NewFixture(t)
	bad, _ := json.Marshal(payments.ResolveJob{Scope: "s", PaymentID: "pay_1"})
	batch := []queue.Message{{ID: "not-json", Body: []byte("{")}, {ID: "bad-body", Body: bad}}
	for range 2 {
		for _, m := range batch {
			// Not an InProgressError on the second round: the first released the key.
			if err := (resolvequeue.Consumer{Service: f.Service()}).Handle(context.Background(), m); err == nil || errors.As(err, new(*idempotency.InProgressError)) {
				t.Fatalf("%s: %v", m.ID, err)
			}
		}
	}
	if len(f.ProviderCalls()) != 0 {
		t.Fatalf("provider called: %v", f.ProviderCalls())
	}
}

// A resolve job through the queue handler: it resolves the payment, and a redelivery of the
// same message (SQS delivers at least once) is answered from its record without a second
// resolution.
func TestResolveQueueRunsEachMessageOnce(t *testing.T) {
	f := payments.NewFixture(t)
	if w := f.Do(t, "POST", "/payments", "k", payments.Body("pm_timeout_once")); w.Code != 202 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	f.Drain(t)
	if len(f.Jobs()) != 1 {
		t.Fatalf("%d jobs", len(f.Jobs()))
	}
	b, _ := json.Marshal(f.Jobs()[0])
	msg := queue.Message{ID: "m-1", Body: b, ReceiveCount: 1}
	for range 2 {
		if err := (resolvequeue.Consumer{Service: f.Service()}).Handle(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		msg.ReceiveCount++ // a redelivery differs in its receive count, never in its key
	}
	// One create before the timeout, one resolution: the redelivery made no call.
	if n := f.ProviderCalls()[provider.IdempotencyKey("local", "k")]; n != 2 {
		t.Fatalf("provider called %d times", n)
	}
	again := f.Do(t, "POST", "/payments", "k", payments.Body("pm_timeout_once"))
	if again.Code != 201 {
		t.Fatalf("after resolve: %d %s", again.Code, again.Body)
	}
}
