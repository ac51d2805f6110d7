package payments_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/payments"
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
	job := payments.ResolveJob{Scope: "jwt:a", Key: "k1", PaymentID: "pay_1", Body: []byte(`{"amount":1}`)}
	if err := (&payments.QueueResolver{Queue: c, Delay: 5 * time.Second}).EnqueueResolve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var got payments.ResolveJob
	if err := json.Unmarshal(c.body, &got); err != nil || got.Key != "k1" || string(got.Body) != `{"amount":1}` || c.opts.Delay != 5*time.Second {
		t.Fatalf("sent %s with %+v (%v)", c.body, c.opts, err)
	}
}

// HandleResolve reports each bad job alone; a job that cannot be parsed, or names no key, never
// reaches the provider or the store.
func TestHandleResolveReportsEachFailure(t *testing.T) {
	s := &payments.Service{}
	bad, _ := json.Marshal(payments.ResolveJob{Scope: "s", PaymentID: "pay_1"})
	resp, err := s.HandleResolve(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "not-json", Body: "{"},
		{MessageId: "bad-body", Body: string(bad)},
	}})
	if err != nil || len(resp.BatchItemFailures) != 2 || resp.BatchItemFailures[0].ItemIdentifier != "not-json" ||
		resp.BatchItemFailures[1].ItemIdentifier != "bad-body" {
		t.Fatalf("%+v, %v", resp, err)
	}
}

// Later resolve attempts back off with full jitter, never past SQS's 15-minute limit, and
// never sooner than the first attempt's settling delay.
func TestResolveBackoffIsJitteredAndCapped(t *testing.T) {
	c := &capture{}
	r := &payments.QueueResolver{Queue: c, Delay: 5 * time.Second, Rand: rand.New(rand.NewPCG(7, 8))}
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 30; attempt++ {
		if err := r.EnqueueResolve(context.Background(), payments.ResolveJob{Scope: "s", Key: "k", PaymentID: "pay_1", Attempt: attempt}); err != nil {
			t.Fatal(err)
		}
		d := c.opts.Delay
		if d < 5*time.Second || d > payments.MaxResolveDelay || (attempt == 1 && d != 5*time.Second) {
			t.Fatalf("attempt %d waits %s", attempt, d)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Fatalf("only %d different delays in 30 attempts: not jittered", len(seen))
	}
}
