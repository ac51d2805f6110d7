package inprocess

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// stripeCall makes one Stripe API call to the simulator with the stack's key.
func stripeCall(t *testing.T, s *Stack, method, path, form string) answer {
	t.Helper()
	return send(t, method, s.SimURL()+path, form,
		http.Header{"Authorization": {"Bearer " + s.Config().StripeAPIKey}, "Content-Type": {"application/x-www-form-urlencoded"}})
}

func getPayment(t *testing.T, s *Stack, id string) payments.View {
	t.Helper()
	var v payments.View
	a := call(t, "GET", s.APIURL()+"/payments/"+id, "", "")
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("payment %s: %d %s", id, a.status, a.body)
	}
	return v
}

// TestRefundsDisputesAndCancelAreApplied: two partial refunds keep the payment succeeded with
// the amount refunded adding up, the last one makes it refunded; a dispute needing a response
// puts its state on the payment and opens one dead-letter record, its updates move the state
// and open nothing more; a dispute naming only its charge finds its payment; a cancel at the provider cancels ours. The timeline shows each event.
func TestRefundsDisputesAndCancelAreApplied(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1})
	v := succeeded(t, s, "cover-refunds")
	pi := deref(v.ProviderPaymentID)
	for _, amount := range []string{"500", "700"} {
		if a := stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+pi+"&amount="+amount); a.status != 200 {
			t.Fatalf("refund: %d %s", a.status, a.body)
		}
	}
	eventually(t, 20*time.Second, "both partial refunds applied", func() bool {
		p := getPayment(t, s, v.ID)
		return p.AmountRefunded == 1200
	})
	if p := getPayment(t, s, v.ID); p.Status != provider.StatusSucceeded {
		t.Fatalf("after partial refunds the payment is %s, want succeeded", p.Status)
	}

	d := succeeded(t, s, "cover-dispute")
	dpi := deref(d.ProviderPaymentID)
	eventually(t, 20*time.Second, "the success is delivered", func() bool {
		return strings.Contains(call(t, "GET", s.SimURL()+"/_sim/stats", "", "").body, `"outbox_entries":0`)
	})
	if a := call(t, "POST", s.SimURL()+"/_sim/payment_intents/"+dpi+"/dispute", "", `{"status":"needs_response","reason":"fraudulent","evidence_due_in_s":86400}`); a.status != 200 {
		t.Fatalf("dispute: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the dispute is on the payment and its dead letter is open", func() bool {
		p := getPayment(t, s, d.ID)
		return p.Dispute != nil && p.Dispute.Status == "needs_response" && p.Dispute.EvidenceDueBy != nil &&
			len(opsList(t, s, "class=dispute_evidence_due")) == 1
	})
	for _, st := range []string{"under_review", "lost"} {
		if a := call(t, "POST", s.SimURL()+"/_sim/payment_intents/"+dpi+"/dispute", "", `{"status":"`+st+`"}`); a.status != 200 {
			t.Fatalf("dispute %s: %d %s", st, a.status, a.body)
		}
		eventually(t, 20*time.Second, "dispute "+st, func() bool {
			p := getPayment(t, s, d.ID)
			return p.Dispute != nil && p.Dispute.Status == st
		})
	}
	if p := getPayment(t, s, d.ID); p.Status != provider.StatusSucceeded || p.Dispute.EvidenceDueBy != nil {
		t.Fatalf("a lost dispute: %+v", p)
	}
	if n := len(opsList(t, s, "class=dispute_evidence_due")); n != 1 {
		t.Fatalf("%d dispute dead letters, want 1", n)
	}

	// A dispute that names only its charge (payment_intent null, as in Stripe's own fixture)
	// finds the payment through the charge's alias, written when the create learned the charge.
	co := succeeded(t, s, "cover-dispute-charge-only")
	if a := call(t, "POST", s.SimURL()+"/_sim/payment_intents/"+deref(co.ProviderPaymentID)+"/dispute", "",
		`{"status":"needs_response","reason":"fraudulent","charge_only":true}`); a.status != 200 {
		t.Fatalf("charge-only dispute: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the charge-only dispute is on the payment", func() bool {
		p := getPayment(t, s, co.ID)
		return p.Dispute != nil && p.Dispute.Status == "needs_response"
	})

	if a := call(t, "POST", s.SimURL()+"/_sim/cards", "", `{"payment_method":"pm_cover_slow","processing":true}`); a.status != 200 {
		t.Fatalf("card: %d %s", a.status, a.body)
	}
	a := call(t, "POST", s.APIURL()+"/payments", "cover-cancel", paymentBody("pm_cover_slow"))
	var c payments.View
	if err := json.Unmarshal([]byte(a.body), &c); err != nil || c.ProviderPaymentID == nil {
		t.Fatalf("processing payment: %d %s", a.status, a.body)
	}
	if a := stripeCall(t, s, "POST", "/v1/payment_intents/"+deref(c.ProviderPaymentID)+"/cancel", "cancellation_reason=abandoned"); a.status != 200 {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the cancel is applied", func() bool {
		return getPayment(t, s, c.ID).Status == provider.StatusCanceled
	})

	var tl opsapi.Timeline
	if st := opsJSON(t, s, "/ops/payments/"+d.ID+"/timeline", &tl); st != 200 {
		t.Fatalf("timeline: %d", st)
	}
	if tl.Payment.Dispute != "lost" {
		t.Errorf("timeline head: dispute %q, want lost", tl.Payment.Dispute)
	}
	for _, title := range []string{"webhook charge.dispute.created", "webhook charge.dispute.updated", "webhook charge.dispute.closed"} {
		if !hasTitle(tl, title) {
			t.Errorf("timeline lacks %q", title)
		}
	}
}
