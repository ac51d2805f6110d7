package inprocess

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
)

// paymentWithRecovery is GET /payments/{id} with the recovery and card objects.
func paymentWithRecovery(t *testing.T, s *Stack, id string) payments.View {
	t.Helper()
	a := call(t, "GET", s.APIURL()+"/payments/"+id, "", "")
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != 200 {
		t.Fatalf("GET %s: %d %s", id, a.status, a.body)
	}
	return v
}

// recoverToEnd declines a payment on pm and waits for its recovery to end.
func recoverToEnd(t *testing.T, s *Stack, key, pm string) (payments.View, int) {
	t.Helper()
	v := createDeclined(t, s, key, pm)
	executionOf(t, s, key)
	charges := 0
	for _, e := range simEvents(t, s, deref(v.ProviderPaymentID)) {
		if e == "payment_failed" || e == "succeeded" {
			charges++
		}
	}
	return v, charges
}

// TestVisaCapAcrossPaymentsThroughTheStack: three payments on one Visa card (one payment
// method, one fingerprint), declined for a technical reason every time, recovered one after
// the other. Together they reach Visa's 20 reattempts in 30 days: 8 + 8 + 4; the 21st is
// refused with the cap named, and the card's attempts left read 0 until the window moves.
func TestVisaCapAcrossPaymentsThroughTheStack(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor})
	programCard(t, s.SimURL(), "pm_visa_tech", "processing_error", 1000)
	var got []int
	var last payments.View
	for i := 1; i <= 3; i++ {
		v, charges := recoverToEnd(t, s, fmt.Sprint("visa-cap-", i), "pm_visa_tech")
		got = append(got, charges-1) // reattempts: every charge after the original
		last = v
	}
	if fmt.Sprint(got) != "[8 8 4]" {
		t.Fatalf("reattempts per payment %v, want [8 8 4]", got)
	}
	var v payments.View
	eventually(t, 10*time.Second, "the third recovery reads stopped", func() bool {
		v = paymentWithRecovery(t, s, last.ID)
		return v.Recovery != nil && v.Recovery.State == payments.RecoveryStopped
	})
	if deref(v.Recovery.Limit) != "visa_30d" || v.Recovery.Attempts != 5 ||
		!strings.Contains(v.Recovery.Explanation, "Visa's limit of 20 reattempts per card in 30 days") ||
		!strings.Contains(v.Recovery.Explanation, "the card may next be charged on") {
		t.Fatalf("recovery %+v", v.Recovery)
	}
	if v.Card == nil || v.Card.Brand != "visa" || v.Card.AttemptsLeft == nil || *v.Card.AttemptsLeft != 0 ||
		deref(v.Card.Limit) != "visa_30d" || v.Card.NextAllowedAt == nil {
		t.Fatalf("card %+v", v.Card)
	}
	next, err := time.Parse(time.RFC3339, *v.Card.NextAllowedAt)
	if err != nil || next.Before(s.clock.Now().Add(29*24*time.Hour)) {
		t.Fatalf("next allowed at %v (%v), want about 30 days after the first reattempt", v.Card.NextAllowedAt, err)
	}
	t.Logf("card: %d attempts left until %s; %s", *v.Card.AttemptsLeft, *v.Card.NextAllowedAt, v.Recovery.Explanation)
}

// TestMastercardCapAcrossPaymentsThroughTheStack: one Mastercard card declines 9 times in one
// payment's recovery; a second payment's original decline is the 10th in 24 hours, so its
// first retry waits for the oldest to leave the 24-hour window, named in its recovery, and
// the card reads 0 attempts left until then.
func TestMastercardCapAcrossPaymentsThroughTheStack(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor})
	a := call(t, "POST", s.SimURL()+"/_sim/cards", "", `{"payment_method":"pm_mc_tech","brand":"mastercard","decline_code":"processing_error","times":1000}`)
	if a.status >= 300 {
		t.Fatalf("program card: %d %s", a.status, a.body)
	}
	if _, charges := recoverToEnd(t, s, "mc-cap-1", "pm_mc_tech"); charges != 9 {
		t.Fatalf("first recovery charged %d times, want 9", charges)
	}
	v := createDeclined(t, s, "mc-cap-2", "pm_mc_tech")
	eventually(t, 10*time.Second, "the second recovery is scheduled", func() bool {
		v = paymentWithRecovery(t, s, v.ID)
		return v.Recovery != nil && v.Recovery.State == payments.RecoveryScheduled
	})
	if deref(v.Recovery.Limit) != "mastercard_24h" || v.Recovery.NextAttemptAt == nil ||
		!strings.Contains(v.Recovery.Explanation, "Mastercard's limit of 10 declines per card in 24 hours") {
		t.Fatalf("recovery %+v", v.Recovery)
	}
	if v.Card == nil || v.Card.AttemptsLeft == nil || *v.Card.AttemptsLeft != 0 || deref(v.Card.Limit) != "mastercard_24h" {
		t.Fatalf("card %+v", v.Card)
	}
	t.Logf("second payment: next attempt %s; %s", *v.Recovery.NextAttemptAt, v.Recovery.Explanation)
}
