package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

func refundEvent(id string, created time.Time, refunded int64) webhooks.Delivery {
	obj := map[string]any{"id": "ch_pi_3", "object": "charge", "payment_intent": "pi_3", "amount": 2000,
		"amount_refunded": refunded, "refunded": refunded == 2000, "metadata": map[string]string{}}
	body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": "charge.refunded", "created": created.Unix(), "data": map[string]any{"object": obj}})
	return webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: created}
}

// TestPartialRefundsInAnyOrder: three refunds of one charge, two of them in the same second of
// Stripe's clock, delivered in every order and twice each: the payment ends refunded with the
// whole amount, and never goes back to a smaller amount on the way.
func TestPartialRefundsInAnyOrder(t *testing.T) {
	history := []webhooks.Delivery{
		stripeEvent("evt_s", "payment_intent.succeeded", t0, "pi_3", "pay_3", nil),
		refundEvent("evt_r1", t0.Add(time.Second), 500),
		refundEvent("evt_r2", t0.Add(time.Second), 1200), // the same second: same version, a bigger amount
		refundEvent("evt_r3", t0.Add(2*time.Second), 2000),
	}
	inEveryOrder(t, history, 18, func(t *testing.T, before, p payments.Payment) {
		if p.AmountRefunded < before.AmountRefunded {
			t.Fatalf("refunded went back from %d to %d", before.AmountRefunded, p.AmountRefunded)
		}
	}, func(t *testing.T, _ *Worker, s store.Store) {
		if p := status(t, s, "pay_3"); p.Status != provider.StatusRefunded || p.AmountRefunded != 2000 {
			t.Fatalf("payment %s refunded %d, want refunded 2000", p.Status, p.AmountRefunded)
		}
	})
	// Only partial refunds: the payment stays succeeded, with the sum the provider reports.
	w, s := newWorker(t)
	seed(t, s, "pay_3")
	for _, d := range history[:3] {
		if _, err := w.Apply(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if p := status(t, s, "pay_3"); p.Status != provider.StatusSucceeded || p.AmountRefunded != 1200 {
		t.Fatalf("after partial refunds: %s refunded %d", p.Status, p.AmountRefunded)
	}
}

func disputeEvent(id, typ string, created time.Time, status string) webhooks.Delivery {
	obj := map[string]any{"id": "dp_3", "object": "dispute", "charge": "ch_pi_3", "payment_intent": "pi_3", "amount": 2000,
		"currency": "usd", "status": status, "reason": "fraudulent"}
	body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created.Unix(), "data": map[string]any{"object": obj}})
	return webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: created}
}

// TestDisputeUpdatesInOneSecond: a dispute's evidence is submitted (needs_response, then
// under_review) in the same second of Stripe's clock, so both charge.dispute.updated events
// carry the same version; then it is won. Delivered in every order and twice each, the payment
// ends with the dispute won, and never moves back along the dispute's lifecycle on the way.
func TestDisputeUpdatesInOneSecond(t *testing.T) {
	history := []webhooks.Delivery{
		stripeEvent("evt_s", "payment_intent.succeeded", t0, "pi_3", "pay_3", nil),
		disputeEvent("evt_d1", "charge.dispute.created", t0.Add(time.Second), "needs_response"),
		disputeEvent("evt_d2", "charge.dispute.updated", t0.Add(2*time.Second), "needs_response"),
		disputeEvent("evt_d3", "charge.dispute.updated", t0.Add(2*time.Second), "under_review"), // the same second
	}
	won := disputeEvent("evt_d4", "charge.dispute.closed", t0.Add(3*time.Second), "won")
	inEveryOrder(t, history, 19, func(t *testing.T, before, p payments.Payment) {
		if before.Dispute != nil && (p.Dispute == nil || disputeRank[p.Dispute.Status] < disputeRank[before.Dispute.Status]) {
			t.Fatalf("the dispute went back from %s to %+v", before.Dispute.Status, p.Dispute)
		}
	}, func(t *testing.T, w *Worker, s store.Store) {
		if p := status(t, s, "pay_3"); p.Dispute == nil || p.Dispute.Status != "under_review" {
			t.Fatalf("dispute %+v, want under_review", p.Dispute)
		}
		if _, err := w.Apply(context.Background(), won); err != nil {
			t.Fatal(err)
		}
		if p := status(t, s, "pay_3"); p.Dispute == nil || p.Dispute.Status != "won" || p.Status != provider.StatusSucceeded {
			t.Fatalf("payment %s, dispute %+v, want succeeded with the dispute won", p.Status, p.Dispute)
		}
	})
}

// inEveryOrder delivers history twice over, in 20 shuffled orders (seeded with salt), each to
// a fresh worker with pay_3 stored and its provider id aliased (the API's commit stores the
// alias, so a refund or dispute first finds the payment): each sees pay_3 before and after
// every delivery, done the worker and store after the last.
func inEveryOrder(t *testing.T, history []webhooks.Delivery, salt uint64, each func(t *testing.T, before, after payments.Payment),
	done func(t *testing.T, w *Worker, s store.Store)) {
	for n := range uint64(20) {
		t.Run(fmt.Sprint("order", n), func(t *testing.T) {
			w, s := newWorker(t)
			seed(t, s, "pay_3")
			if err := s.Transact(context.Background(), payments.AliasWrite("pi_3", "pay_3")); err != nil {
				t.Fatal(err)
			}
			ds := append(append([]webhooks.Delivery{}, history...), history...)
			rand.New(rand.NewPCG(n, salt)).Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			before := status(t, s, "pay_3")
			for _, d := range ds {
				if _, err := w.Apply(context.Background(), d); err != nil {
					t.Fatal(err)
				}
				after := status(t, s, "pay_3")
				each(t, before, after)
				before = after
			}
			done(t, w, s)
		})
	}
}

// disputeRank mirrors the lifecycle order the test checks against.
var disputeRank = map[string]int{"needs_response": 1, "under_review": 2, "won": 3}

// TestDisputeFoundThroughItsCharge: a dispute whose payment_intent is null (Stripe's own dispute
// fixture has it so) names only its charge. The charge's alias, written when an event told the
// worker the payment's latest_charge, finds the payment; a dispute of a charge nobody aliased
// is recorded only.
func TestDisputeFoundThroughItsCharge(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_3")
	ctx := context.Background()
	succeeded := stripeEvent("evt_s", "payment_intent.succeeded", t0, "pi_3", "pay_3", nil)
	var env map[string]any
	if err := json.Unmarshal(succeeded.Body, &env); err != nil {
		t.Fatal(err)
	}
	env["data"].(map[string]any)["object"].(map[string]any)["latest_charge"] = "ch_9"
	succeeded.Body, _ = json.Marshal(env)
	if _, err := w.Apply(ctx, succeeded); err != nil {
		t.Fatal(err)
	}
	chargeOnly := func(id, charge string) webhooks.Delivery {
		obj := map[string]any{"id": "dp_" + charge, "object": "dispute", "charge": charge, "payment_intent": nil, "amount": 2000,
			"currency": "usd", "status": "needs_response", "reason": "fraudulent", "evidence_details": map[string]any{"due_by": t0.Add(7 * 24 * time.Hour).Unix()}}
		body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": "charge.dispute.created", "created": t0.Add(time.Hour).Unix(),
			"data": map[string]any{"object": obj}})
		return webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: t0.Add(time.Hour)}
	}
	if out, err := w.Apply(ctx, chargeOnly("evt_d", "ch_9")); err != nil || out != payments.Applied {
		t.Fatalf("a dispute of our charge: %s %v", out, err)
	}
	if p := status(t, s, "pay_3"); p.Dispute == nil || p.Dispute.Status != "needs_response" || p.LatestCharge != "ch_9" {
		t.Fatalf("payment after the dispute: %+v", p)
	}
	if out, err := w.Apply(ctx, chargeOnly("evt_x", "ch_unknown")); err != nil || out == payments.Applied {
		t.Fatalf("a dispute of a charge nobody aliased: %s %v", out, err)
	}
}

// TestDeclineEventRecordsItsCard: a payment_failed event names the declined card in
// last_payment_error.payment_method.card; the worker records it, so a recovery planned from a
// record the event made first still counts the card's network caps.
func TestDeclineEventRecordsItsCard(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_3")
	d := stripeEvent("evt_f", "payment_intent.payment_failed", t0, "pi_3", "pay_3", nil)
	var env map[string]any
	if err := json.Unmarshal(d.Body, &env); err != nil {
		t.Fatal(err)
	}
	lpe := env["data"].(map[string]any)["object"].(map[string]any)["last_payment_error"].(map[string]any)
	lpe["payment_method"] = map[string]any{"id": "pm_1", "object": "payment_method",
		"card": map[string]any{"brand": "mastercard", "fingerprint": "fp_mc_1", "last4": "4444"}}
	d.Body, _ = json.Marshal(env)
	if out, err := w.Apply(context.Background(), d); err != nil || out != payments.Applied {
		t.Fatalf("apply: %s %v", out, err)
	}
	if p := status(t, s, "pay_3"); p.Card == nil || p.Card.Fingerprint != "fp_mc_1" || p.Card.Last4 != "4444" || p.Card.Brand != "mastercard" {
		t.Fatalf("card after the decline event: %+v", p.Card)
	}
}
