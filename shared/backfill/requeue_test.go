package backfill_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

var t0 = time.Date(2027, 3, 4, 10, 0, 0, 0, time.UTC)

// events is the provider's event log: every event, newest first, listed as Stripe lists it
// (created bounds inclusive; After walks toward newer events oldest first, as stripe-go does
// with ending_before; Before continues below an event, as starting_after does).
type events []provider.Event

func (l events) Events(_ context.Context, q provider.EventQuery) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		at, step := 0, 1 // newest first
		if cur := q.After + q.Before; cur != "" {
			i := slices.IndexFunc(l, func(ev provider.Event) bool { return ev.ID == cur })
			if i < 0 {
				yield(provider.Event{}, fmt.Errorf("no such event: %s", cur))
				return
			}
			at = i + 1
			if q.After != "" {
				at, step = i-1, -1
			}
		}
		for ; at >= 0 && at < len(l); at += step {
			ev := l[at]
			if ev.Created.Before(q.CreatedFrom) || !q.CreatedTo.IsZero() && ev.Created.After(q.CreatedTo) {
				continue
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// succeeded is payment_intent.succeeded for pay_1, whose metadata names the payment but not
// its scope: until pay_1 is stored it cannot be applied (payments.ErrPaymentNotYet).
func succeeded(created time.Time) provider.Event {
	obj := map[string]any{"id": "pi_1", "object": "payment_intent", "status": "succeeded", "amount": 2000,
		"currency": "usd", "customer": "cus_1", "metadata": map[string]string{"twice_payment_id": "pay_1"}}
	body, _ := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": "payment_intent.succeeded",
		"created": created.Unix(), "data": map[string]any{"object": obj}})
	return provider.Event{ID: "evt_1", Type: "payment_intent.succeeded", Created: created, Body: body}
}

// newPass is the store, clock and applier a backfill pass runs on.
func newPass(t *testing.T) (*boltstore.Store, *clock.Fake, *payments.Applier) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(t0)
	wk := &payments.Applier{Store: st, Now: c.Now, Log: slog.New(slog.DiscardHandler), Classify: func(provider.Decline) string { return "" }}
	return st, c, wk
}

// sentQueue is the webhook queue as this test reads it: it refuses what SQS refuses
// (queue.CheckSend), keeps every message sent, and a receive returns them in order.
type sentQueue struct{ sent []queue.Message }

func (q *sentQueue) Send(_ context.Context, body []byte, opts queue.SendOptions) (string, error) {
	if err := queue.CheckSend(body, opts); err != nil {
		return "", err
	}
	id := fmt.Sprint("msg_", len(q.sent)+1)
	q.sent = append(q.sent, queue.Message{ID: id, Body: slices.Clone(body), Attributes: opts.Attributes, ReceiveCount: 1})
	return id, nil
}

func (q *sentQueue) Receive(context.Context, int, time.Duration, time.Duration) ([]queue.Message, error) {
	return q.sent, nil
}

// An event the backfill cannot apply now becomes one outbox message (the same one however many
// passes list it), the checkpoint moves past it, and the relay's handler sends it to the
// webhook queue as a delivery the worker takes: delivered twice (a relay that died between the
// send and the delete), it reaches the queue twice and the worker applies it once.
func TestUnappliedEventIsRequeuedThroughTheOutbox(t *testing.T) {
	ctx := context.Background()
	st, c, wk := newPass(t)
	b := &backfill.Backfill{Store: st, Events: events{succeeded(t0.Add(-time.Minute))}, Applier: wk, Now: c.Now, Log: wk.Log}

	for pass := 1; pass <= 2; pass++ { // the second pass's overlap lists the event again
		rep, err := b.Run(ctx, backfill.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Listed != 1 || rep.Requeued != 1 || len(rep.Applied) != 0 || !rep.Checkpoint.Equal(c.Now().Truncate(time.Second)) {
			t.Fatalf("pass %d: %+v", pass, rep)
		}
		c.Advance(time.Minute)
	}
	due, err := outbox.Undelivered(ctx, st, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 {
		t.Fatalf("%d outbox messages after two passes, want one", len(due))
	}
	it := due[0]
	m, err := outbox.Decode(it)
	if err != nil || m.ID != backfill.RequeueID("evt_1") || m.Kind != backfill.KindRequeue {
		t.Fatalf("outbox message %+v, %v", m, err)
	}

	// The payment's commit lands; the relay delivers the message twice.
	p := payments.Payment{ID: "pay_1", Scope: "local", Status: provider.StatusPending, Amount: 2000, Currency: "usd",
		Customer: "cus_1", CreatedAt: t0.Add(-time.Hour), Version: payments.VersionAt(t0.Add(-time.Hour), provider.StatusPending)}
	w, _ := p.Put()
	if err := st.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	q := &sentQueue{}
	relay := &outbox.Relay{Store: st, Handlers: backfill.FollowOns(q), Now: c.Now, Log: wk.Log}
	for range 2 {
		if err := relay.Deliver(ctx, m, it.Version); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Get(ctx, outbox.Table, m.ID, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered message still in the outbox: %v", err)
	}
	msgs, err := q.Receive(ctx, 10, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("%d messages on the webhook queue, want one per delivery (2)", len(msgs))
	}
	var outcomes []payments.Effect
	for _, msg := range msgs {
		var d webhooks.Delivery
		if err := json.Unmarshal(msg.Body, &d); err != nil || d.EventID != "evt_1" || msg.Attributes["provider"] != webhooks.ProviderStripe {
			t.Fatalf("queue message %s %v: not the delivery ingest sends (%v)", msg.Body, msg.Attributes, err)
		}
		ev, err := webhooks.Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		out, err := wk.Apply(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, out)
	}
	if outcomes[0] != payments.Applied || outcomes[1] != payments.Duplicate {
		t.Fatalf("worker outcomes %v, want applied then duplicate", outcomes)
	}
	if got, err := payments.Get(ctx, st, "pay_1"); err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("pay_1: %+v %v", got, err)
	}
}
