package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// paidPayment creates a payment of amount with pm and returns its id and provider id.
func paidPayment(t *testing.T, s *Stack, key, pm string, amount int64) (string, string) {
	t.Helper()
	a := call(t, "POST", s.APIURL()+"/payments", key,
		fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_refund","payment_method":%q}`, amount, pm))
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.Status != provider.StatusSucceeded || v.ProviderPaymentID == nil {
		t.Fatalf("create: %s (%v)", a.body, err)
	}
	return v.ID, *v.ProviderPaymentID
}

func refund(t *testing.T, s *Stack, id, key, body string) answer {
	t.Helper()
	return call(t, "POST", s.APIURL()+"/payments/"+id+"/refunds", key, body)
}

// simRefunds lists the provider's refunds of a PaymentIntent, as stripe-go would.
func simRefunds(t *testing.T, s *Stack, pi string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", s.SimURL()+"/v1/refunds?limit=100&payment_intent="+pi, nil)
	req.SetBasicAuth(s.cfg.StripeAPIKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Data
}

func TestRefundsFullPartialReplayedAndOverRefunded(t *testing.T) {
	s := newStack(t, Config{})
	id, pi := paidPayment(t, s, "pay-refunds", "pm_card_visa", 2500)

	part := refund(t, s, id, "refund-part", `{"amount":1000,"reason":"requested_by_customer"}`)
	if part.status != http.StatusCreated {
		t.Fatalf("partial refund: %d %s", part.status, part.body)
	}
	var rv payments.RefundView
	if err := json.Unmarshal([]byte(part.body), &rv); err != nil || rv.Amount != 1000 || rv.Payment != id ||
		rv.Status != "succeeded" || rv.Currency != "usd" || rv.Reason == nil || *rv.Reason != "requested_by_customer" || rv.CreatedAt == "" {
		t.Fatalf("partial refund answer: %s", part.body)
	}
	again := refund(t, s, id, "refund-part", `{"reason":"requested_by_customer","amount":1000}`)
	if again.status != part.status || again.body != part.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q %s\nfirst: %s", again.status, again.header.Get("Idempotent-Replayed"), again.body, part.body)
	}
	if other := refund(t, s, id, "refund-part", `{"amount":999}`); other.status != http.StatusUnprocessableEntity {
		t.Fatalf("same key, another amount: %d %s", other.status, other.body)
	}

	over := refund(t, s, id, "refund-over", `{"amount":2000}`)
	var op struct {
		Type      string `json:"type"`
		Remaining int64  `json:"remaining"`
	}
	if over.status != http.StatusUnprocessableEntity || json.Unmarshal([]byte(over.body), &op) != nil ||
		op.Remaining != 1500 || op.Type != "https://github.com/runtwice/twice/blob/main/README.md#problem-refund-exceeds-remaining" {
		t.Fatalf("over-refund: %d %s", over.status, over.body)
	}

	full := refund(t, s, id, "refund-rest", ``)
	if full.status != http.StatusCreated || json.Unmarshal([]byte(full.body), &rv) != nil || rv.Amount != 1500 {
		t.Fatalf("refund of the rest: %d %s", full.status, full.body)
	}
	// The over-refund was not stored: its key now meets a fully refunded payment.
	if again := refund(t, s, id, "refund-over", `{"amount":2000}`); again.status != http.StatusUnprocessableEntity ||
		json.Unmarshal([]byte(again.body), &op) != nil || op.Remaining != 0 {
		t.Fatalf("refund of a refunded payment: %d %s", again.status, again.body)
	}

	v := getPayment(t, s, id)
	if v.Status != provider.StatusRefunded || v.AmountRefunded != 2500 || len(v.Refunds) != 2 ||
		v.Refunds[0].Amount != 1000 || v.Refunds[1].Amount != 1500 {
		t.Fatalf("GET after refunds: %+v", v)
	}
	if got := simRefunds(t, s, pi); len(got) != 2 {
		t.Fatalf("the provider holds %d refunds, want 2", len(got))
	}
	// Every refund event the provider sends (refund.created, charge.refunded) changes nothing.
	eventually(t, 10*time.Second, "refund webhooks delivered", func() bool {
		n := 0
		for _, e := range simEventStates(t, s, pi) {
			if e.State == "delivered" && (e.Type == "refund.created" || e.Type == "charge.refunded") {
				n++
			}
		}
		return n == 4
	})
	if after := getPayment(t, s, id); after.AmountRefunded != 2500 || len(after.Refunds) != 2 || after.Status != provider.StatusRefunded {
		t.Fatalf("after the webhooks: %+v", after)
	}

	if nf := refund(t, s, "pay_nope", "refund-nf", ``); nf.status != http.StatusNotFound {
		t.Fatalf("refund of no payment: %d %s", nf.status, nf.body)
	}
	declined := call(t, "POST", s.APIURL()+"/payments", "pay-declined", paymentBody("pm_card_visa_chargeDeclined"))
	var dv payments.View
	_ = json.Unmarshal([]byte(declined.body), &dv)
	if a := refund(t, s, dv.ID, "refund-declined", ``); a.status != http.StatusConflict {
		t.Fatalf("refund of a declined payment: %d %s", a.status, a.body)
	}
	if bad := refund(t, s, id, "refund-bad", `{"amount":-1}`); bad.status != http.StatusBadRequest {
		t.Fatalf("negative amount: %d %s", bad.status, bad.body)
	}
}

type simEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	ObjectID string `json:"object_id"`
	State    string `json:"state"`
}

func simEventStates(t *testing.T, s *Stack, pi string) []simEvent {
	t.Helper()
	a := call(t, "GET", s.SimURL()+"/_sim/events?object_id="+pi, "", "")
	var body struct {
		Data []simEvent `json:"data"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatalf("sim events %q: %v", a.body, err)
	}
	return body.Data
}

func TestTwentyConcurrentRefundsNeverExceedTheCapture(t *testing.T) {
	s := newStack(t, Config{})
	id, pi := paidPayment(t, s, "pay-concurrent", "pm_card_visa", 2000)
	var wg sync.WaitGroup
	answers := make([]answer, 20)
	for i := range answers {
		wg.Go(func() { answers[i] = refund(t, s, id, fmt.Sprintf("refund-%02d", i), `{"amount":300}`) })
	}
	wg.Wait()
	created := 0
	for i, a := range answers {
		switch a.status {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
		default:
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	if created != 6 {
		t.Fatalf("%d refunds of 300 succeeded on 2,000, want 6", created)
	}
	var sum int64
	for _, r := range simRefunds(t, s, pi) {
		sum += int64(r["amount"].(float64))
	}
	if n := len(simRefunds(t, s, pi)); n != 6 || sum != 1800 {
		t.Fatalf("the provider holds %d refunds for %d, want 6 for 1800", n, sum)
	}
	if v := getPayment(t, s, id); v.AmountRefunded != 1800 || len(v.Refunds) != 6 || v.Status != provider.StatusSucceeded {
		t.Fatalf("locally: %d refunded in %d refunds, %s", v.AmountRefunded, len(v.Refunds), v.Status)
	}
}

func TestAFailedRefundRestoresTheAmountAndOpensADeadLetter(t *testing.T) {
	s := newStack(t, Config{RefundFailureDelay: time.Nanosecond})
	id, pi := paidPayment(t, s, "pay-refundfail", "pm_card_refundFail", 2000)
	a := refund(t, s, id, "refund-fails", `{"amount":1200}`)
	var rv payments.RefundView
	if a.status != http.StatusCreated || json.Unmarshal([]byte(a.body), &rv) != nil || rv.Status != "succeeded" {
		t.Fatalf("refund: %d %s", a.status, a.body)
	}
	// The simulator fails it on its next pass (the stack's own, or this one).
	if _, err := s.sim.RunDue(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the failure applied", func() bool {
		v := getPayment(t, s, id)
		return len(v.Refunds) == 1 && v.Refunds[0].Status == "failed" && v.AmountRefunded == 0
	})
	v := getPayment(t, s, id)
	if v.Status != provider.StatusSucceeded || v.Refunds[0].FailureReason == nil || *v.Refunds[0].FailureReason != "expired_or_canceled_card" {
		t.Fatalf("after the failure: %+v", v)
	}
	var open []deadletter.Record
	eventually(t, 10*time.Second, "a dead-letter record for the failed refund", func() bool {
		page, err := s.deadletters.List(context.Background(), deadletter.Filter{Cause: deadletter.CauseRefundFailed})
		if err != nil {
			t.Fatal(err)
		}
		open = page.Records
		return len(open) > 0
	})
	if len(open) != 1 || open[0].PaymentID != id || open[0].Explanation == "" || open[0].SuggestedAction == "" {
		t.Fatalf("dead letters: %+v", open)
	}
	// The amount is refundable again: the second refund the failure had blocked goes through.
	if again := refund(t, s, id, "refund-too-much", `{"amount":900}`); again.status != http.StatusCreated {
		t.Fatalf("after the failure: %d %s", again.status, again.body)
	}
	if got := simRefunds(t, s, pi); len(got) != 2 {
		t.Fatalf("the provider holds %d refunds, want 2", len(got))
	}
	// The card fails every refund: the second one fails too, and opens its own record.
	eventually(t, 10*time.Second, "the second failure applied", func() bool {
		v := getPayment(t, s, id)
		return len(v.Refunds) == 2 && v.Refunds[1].Status == "failed" && v.AmountRefunded == 0
	})
	eventually(t, 10*time.Second, "two dead-letter records", func() bool {
		page, err := s.deadletters.List(context.Background(), deadletter.Filter{Cause: deadletter.CauseRefundFailed})
		return err == nil && len(page.Records) == 2
	})
}

// TestAnUnknownRefundResolvesWithoutAClientRetry: the provider makes the refund but its answer
// never comes back, and every event about it is lost, so the API answers 202 with the amount
// reserved. The caller never retries: the resolve job committed with the pending key repeats
// the refund under the same provider key, records it, and completes the key, so a later
// replay returns the outcome. The provider holds one refund.
func TestAnUnknownRefundResolvesWithoutAClientRetry(t *testing.T) {
	s := newStack(t, Config{ProviderTimeout: 300 * time.Millisecond, ResolveDelay: 50 * time.Millisecond})
	id, pi := paidPayment(t, s, "pay-refund-unknown", "pm_card_visa", 2000)
	if a := call(t, "POST", s.SimURL()+"/_sim/webhooks/drop", "", `{"count":2}`); a.status >= 300 {
		t.Fatalf("drop: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/refunds","fault":"timeout_after_effect","count":1}`); a.status != http.StatusCreated {
		t.Fatalf("arm: %d %s", a.status, a.body)
	}
	first := refund(t, s, id, "refund-unknown", `{"amount":700}`)
	var rv payments.RefundView
	if err := json.Unmarshal([]byte(first.body), &rv); err != nil || first.status != http.StatusAccepted || rv.Status != "pending" || rv.Amount != 700 {
		t.Fatalf("first answer: %d %s", first.status, first.body)
	}
	eventually(t, 20*time.Second, "the pending refund resolves in the background", func() bool {
		v := getPayment(t, s, id)
		return v.AmountRefunded == 700 && len(v.Refunds) == 1 && v.Refunds[0].Status == "succeeded"
	})
	// The resolver commits the refund's outcome to the payment (a checkpoint under the key's
	// lease), then completes the key in the next commit, and only then is its job done: a
	// replay between the two still gets the interim 202. Wait for the job, not the payment.
	eventually(t, 20*time.Second, "the resolve job is done", func() bool {
		return s.queuePending() == 0 && s.outboxPending(t.Context()) == 0
	})
	later := refund(t, s, id, "refund-unknown", `{"amount":700}`)
	if err := json.Unmarshal([]byte(later.body), &rv); err != nil || later.status != http.StatusCreated || later.header.Get("Idempotent-Replayed") != "true" ||
		rv.ID != payments.RefundID("local", "refund-unknown") || rv.Status != "succeeded" || rv.ProviderRefundID == nil {
		t.Fatalf("replay after the resolution: %d %q %s", later.status, later.header.Get("Idempotent-Replayed"), later.body)
	}
	if rs := simRefunds(t, s, pi); len(rs) != 1 || rs[0]["amount"] != float64(700) {
		t.Fatalf("the provider holds %d refunds: %v", len(rs), rs)
	}
}
