package payments

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

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
	job := ResolveJob{Scope: "jwt:a", Key: "k1", PaymentID: "pay_1"}
	if err := (&QueueResolver{Queue: c, Delay: 5 * time.Second}).EnqueueResolve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var got ResolveJob
	if err := json.Unmarshal(c.body, &got); err != nil || got.Key != "k1" || c.opts.Delay != 5*time.Second {
		t.Fatalf("sent %s with %+v (%v)", c.body, c.opts, err)
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
