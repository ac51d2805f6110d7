package payments

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/webhooks"
)

// sampleObject is a minimal data.object for an event type, shaped as Stripe sends it.
func sampleObject(typ string) (obj map[string]any, previous map[string]any) {
	switch {
	case strings.HasPrefix(typ, "payment_intent."):
		return map[string]any{"id": "pi_t", "object": "payment_intent", "status": "succeeded", "amount": 100, "currency": "usd",
			"metadata": map[string]string{"twice_payment_id": "pay_t"}}, nil
	case typ == "charge.refunded":
		return map[string]any{"id": "ch_t", "object": "charge", "payment_intent": "pi_t", "amount": 100, "amount_refunded": 100,
			"refunded": true, "metadata": map[string]string{}}, nil
	case strings.HasPrefix(typ, "refund.") || typ == "charge.refund.updated":
		return map[string]any{"id": "re_t", "object": "refund", "payment_intent": "pi_t", "charge": "ch_t", "amount": 100,
			"currency": "usd", "status": "succeeded", "metadata": map[string]string{}}, nil
	case strings.HasPrefix(typ, "charge.dispute."):
		return map[string]any{"id": "dp_t", "object": "dispute", "charge": "ch_t", "payment_intent": "pi_t", "amount": 100,
			"currency": "usd", "status": "needs_response", "reason": "fraudulent"}, nil
	case strings.HasPrefix(typ, "payment_method."):
		return map[string]any{"id": "pm_t", "object": "payment_method", "type": "card", "customer": "cus_t"}, nil
	case typ == "customer.updated":
		return map[string]any{"id": "cus_t", "object": "customer", "invoice_settings": map[string]any{"default_payment_method": "pm_new"}},
			map[string]any{"invoice_settings": map[string]any{"default_payment_method": "pm_old"}}
	case typ == "invoice.paid":
		return map[string]any{"id": "in_t", "object": "invoice", "customer": "cus_t"}, nil
	}
	return map[string]any{"id": "x_t", "object": "unknown"}, nil
}

// TestStripeEventTypesAreApplied: every listed type, decoded from a delivery of its shape, is
// one Apply acts on; and the PaymentIntent types the decoder orders but Apply only records
// (created, partially_funded) are not listed. So the list a Stripe endpoint is set up from is
// the list the code applies.
func TestStripeEventTypesAreApplied(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	recordedOnly := []string{"payment_intent.created", "payment_intent.partially_funded", "charge.succeeded", "customer.created"}
	for _, typ := range append(slices.Clone(StripeEventTypes), recordedOnly...) {
		obj, prev := sampleObject(typ)
		data := map[string]any{"object": obj}
		if prev != nil {
			data["previous_attributes"] = prev
		}
		body, _ := json.Marshal(map[string]any{"id": "evt_" + typ, "object": "event", "type": typ, "created": t0.Unix(), "data": data})
		ev, err := webhooks.Decode(webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: "evt_" + typ, Body: body, ReceivedAt: t0})
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		listed := slices.Contains(StripeEventTypes, typ)
		if got := applies(ev); got != listed {
			t.Errorf("%s: Apply acts on it: %v; StripeEventTypes lists it: %v", typ, got, listed)
		}
	}
}

// applies reports whether Apply acts on ev beyond recording it: the three branches of
// paymentFor, writes' steering and applyRefund.
func applies(ev webhooks.Event) bool {
	_, status := eventStatus(ev)
	return status || amends(ev) || ev.Steer != nil || ev.Refund != nil
}
