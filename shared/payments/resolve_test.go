package payments

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
)

type capture struct {
	body []byte
	opts queue.SendOptions
}

func (c *capture) Send(_ context.Context, body []byte, opts queue.SendOptions) (string, error) {
	c.body, c.opts = body, opts
	return "m1", nil
}

func TestQueueResolverSendsTheJobDelayed(t *testing.T) {
	c := &capture{}
	job := ResolveJob{Scope: "jwt:a", Key: "k1", PaymentID: "pay_1", Body: []byte(`{"amount":1}`)}
	if err := (&QueueResolver{Queue: c, Delay: 5 * time.Second}).EnqueueResolve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var got ResolveJob
	if err := json.Unmarshal(c.body, &got); err != nil || got.Key != "k1" || string(got.Body) != `{"amount":1}` || c.opts.Delay != 5*time.Second {
		t.Fatalf("sent %s with %+v (%v)", c.body, c.opts, err)
	}
}

// HandleResolve fails each bad job alone; a job that cannot be parsed, or names no key, never
// reaches the provider, and its message record is released (a redelivery runs it again).
func TestHandleResolveReportsEachFailure(t *testing.T) {
	f := newFixture(t)
	bad, _ := json.Marshal(ResolveJob{Scope: "s", PaymentID: "pay_1"})
	batch := []queue.Message{{ID: "not-json", Body: []byte("{")}, {ID: "bad-body", Body: bad}}
	for range 2 {
		for _, m := range batch {
			// Not an InProgressError on the second round: the first released the key.
			if err := f.svc.HandleResolve(context.Background(), m); err == nil || errors.As(err, new(*idempotency.InProgressError)) {
				t.Fatalf("%s: %v", m.ID, err)
			}
		}
	}
	if len(f.prov.calls) != 0 {
		t.Fatalf("provider called: %v", f.prov.calls)
	}
}

// A resolve job through the queue handler: it resolves the payment, and a redelivery of the
// same message (SQS delivers at least once) is answered from its record without a second
// resolution.
func TestHandleResolveRunsEachMessageOnce(t *testing.T) {
	f := newFixture(t)
	if w := f.do(t, "POST", "/payments", "k", body("pm_timeout_once")); w.Code != 202 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	f.drain(t)
	if len(f.jobs.list) != 1 {
		t.Fatalf("%d jobs", len(f.jobs.list))
	}
	b, _ := json.Marshal(f.jobs.list[0])
	msg := queue.Message{ID: "m-1", Body: b, ReceiveCount: 1}
	for range 2 {
		if err := f.svc.HandleResolve(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		msg.ReceiveCount++ // a redelivery differs in its receive count, never in its key
	}
	// One create before the timeout, one resolution: the redelivery made no call.
	if n := f.prov.calls[provider.IdempotencyKey("local", "k")]; n != 2 {
		t.Fatalf("provider called %d times", n)
	}
	again := f.do(t, "POST", "/payments", "k", body("pm_timeout_once"))
	if again.Code != 201 {
		t.Fatalf("after resolve: %d %s", again.Code, again.Body)
	}
}

// Later resolve attempts back off with full jitter, never past SQS's 15-minute limit, and
// never sooner than the first attempt's settling delay.
func TestResolveBackoffIsJitteredAndCapped(t *testing.T) {
	c := &capture{}
	r := &QueueResolver{Queue: c, Delay: 5 * time.Second, Rand: rand.New(rand.NewPCG(7, 8))}
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 30; attempt++ {
		if err := r.EnqueueResolve(context.Background(), ResolveJob{Scope: "s", Key: "k", PaymentID: "pay_1", Attempt: attempt}); err != nil {
			t.Fatal(err)
		}
		d := c.opts.Delay
		if d < 5*time.Second || d > MaxResolveDelay || (attempt == 1 && d != 5*time.Second) {
			t.Fatalf("attempt %d waits %s", attempt, d)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Fatalf("only %d different delays in 30 attempts: not jittered", len(seen))
	}
}
