package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/webhooks"
)

// flowEvent is a PaymentIntent event with the fields the waiting statuses carry.
func flowEvent(id, typ string, created time.Time, obj map[string]any) webhooks.Delivery {
	base := map[string]any{"id": "pi_f", "object": "payment_intent", "amount": 2000, "currency": "usd", "customer": "cus_9",
		"metadata": map[string]string{"twice_payment_id": "pay_f"}}
	for k, v := range obj {
		base[k] = v
	}
	body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created.Unix(), "data": map[string]any{"object": base}})
	return webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: created}
}

// TestWaitingStatusesMoveByEvents: the customer's action and an authorization are statuses of
// their own, with what goes with them, and leaving them clears it.
func TestWaitingStatusesMoveByEvents(t *testing.T) {
	steps := []struct {
		ev    webhooks.Delivery
		check func(p payments.Payment) bool
	}{
		{flowEvent("evt_a", "payment_intent.requires_action", t0, map[string]any{"status": "requires_action",
			"next_action": map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{"url": "https://hooks.example/3ds"}}}),
			func(p payments.Payment) bool {
				return p.Status == provider.StatusRequiresAction && p.NextAction != nil &&
					p.NextAction.Type == "redirect_to_url" && p.NextAction.RedirectURL == "https://hooks.example/3ds"
			}},
		{flowEvent("evt_b", "payment_intent.amount_capturable_updated", t0.Add(time.Second), map[string]any{"status": "requires_capture",
			"amount_capturable": 2000}),
			func(p payments.Payment) bool {
				return p.Status == provider.StatusRequiresCapture && p.AmountCapturable == 2000 && p.NextAction == nil
			}},
		{flowEvent("evt_c", "payment_intent.canceled", t0.Add(2*time.Second), map[string]any{"status": "canceled",
			"cancellation_reason": "abandoned"}),
			func(p payments.Payment) bool {
				return p.Status == provider.StatusCanceled && p.AmountCapturable == 0 && p.CancellationReason == "abandoned"
			}},
	}
	w, s := newWorker(t)
	seed(t, s, "pay_f")
	for _, st := range steps {
		if o, err := w.Apply(context.Background(), st.ev); err != nil || o != payments.Applied {
			t.Fatalf("%s: %v %v", st.ev.EventID, o, err)
		}
		if p := status(t, s, "pay_f"); !st.check(p) {
			t.Fatalf("after %s: %+v", st.ev.EventID, p)
		}
	}
	// The requires_action event, delivered late, is older than the cancel: ignored.
	late := flowEvent("evt_late", "payment_intent.requires_action", t0.Add(time.Second), map[string]any{"status": "requires_action"})
	if o, err := w.Apply(context.Background(), late); err != nil || o != payments.Stale {
		t.Fatalf("late requires_action: %v %v", o, err)
	}
}

// TestReclassifyingEventSteersTheRunningRecovery: a later decline event of another class
// commits a replan signal for the running recovery; one of the same class does not.
func TestReclassifyingEventSteersTheRunningRecovery(t *testing.T) {
	w, s := newWorker(t)
	ctx := context.Background()
	seed(t, s, "pay_f")
	failed := func(id string, at time.Time, code string) webhooks.Delivery {
		return flowEvent(id, "payment_intent.payment_failed", at, map[string]any{"status": "requires_payment_method",
			"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": code}})
	}
	if o, err := w.Apply(ctx, failed("evt_1", t0, "generic_decline")); err != nil || o != payments.Applied {
		t.Fatalf("first decline: %v %v", o, err)
	}
	rw, err := payments.Recovery{PaymentID: "pay_f", State: payments.RecoveryScheduled, Round: 1, Seq: 1, NextAttemptAt: t0.Add(72 * time.Hour)}.Writes()
	if err != nil || s.Transact(ctx, rw...) != nil {
		t.Fatalf("recovery: %v", err)
	}
	if o, err := w.Apply(ctx, failed("evt_2", t0.Add(time.Second), "generic_decline")); err != nil || o != payments.Applied {
		t.Fatalf("same class: %v %v", o, err)
	}
	if sg, err := recovery.GetSteer(ctx, s, "pay_f"); err != nil || sg != nil {
		t.Fatalf("a decline of the same class steered: %+v %v", sg, err)
	}
	if o, err := w.Apply(ctx, failed("evt_3", t0.Add(2*time.Second), "authentication_required")); err != nil || o != payments.Applied {
		t.Fatalf("reclassified: %v %v", o, err)
	}
	sg, err := recovery.GetSteer(ctx, s, "pay_f")
	if err != nil || sg == nil || sg.Action != recovery.ActionReplan || sg.Reason != recovery.ReasonReclassified {
		t.Fatalf("signal %+v %v", sg, err)
	}
	if p := status(t, s, "pay_f"); p.DeclineClass != "class-authentication_required" {
		t.Fatalf("payment %+v", p)
	}
}
