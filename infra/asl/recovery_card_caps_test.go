package asl_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
)

// declinedOn records a declined payment charged on a known card, as the payments API stores
// one after a decline.
func (h *harness) declinedOn(id, pm, code, brand, fp string) payments.Payment {
	h.t.Helper()
	now := h.clock.Now()
	p := payments.Payment{ID: id, Scope: "local", IdempotencyKey: "k_" + id, ProviderKey: "pk_" + id, Status: provider.StatusDeclined,
		Amount: 1000, Currency: "usd", Customer: "cus_1", PaymentMethod: pm, Invoice: "inv_" + id,
		ProviderPaymentID: "pi_" + id, Decline: &provider.Decline{Code: code, ErrorCode: "card_declined", Network: brand},
		Card:      &payments.CardRef{Fingerprint: fp, Brand: brand, Last4: "4242"},
		CreatedAt: now, UpdatedAt: now, Version: payments.VersionAt(now, provider.StatusDeclined)}
	return h.save(p)
}

// recoverToEnd starts the payment's recovery and runs it to its end on the fake clock.
func (h *harness) recoverToEnd(p payments.Payment) recovery.State {
	h.t.Helper()
	if err := h.rec.Declined(context.Background(), p); err != nil {
		h.t.Fatal(err)
	}
	ex, _, _ := h.recovery(h.arn(p.Invoice))
	if ex.Status != asl.StatusSucceeded {
		h.t.Fatalf("%s: status %s: %s %s", p.ID, ex.Status, ex.Error, ex.Cause)
	}
	return output(h.t, ex)
}

func reattempts(st recovery.State) int { return len(st.Charges) - 1 }

// TestVisaCapAcrossPayments: three payments on one Visa card, each declined for a technical
// reason every time. The first two recoveries use their 8 retries each; the third gets the 4
// that Visa's 20 reattempts per card in 30 days leave, and its 21st is refused with the cap
// named and the moment the card may next be charged. The card's allowance reads 0 until the
// oldest reattempt leaves the 30-day window.
func TestVisaCapAcrossPayments(t *testing.T) {
	clk := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm_tech", recoverytest.Script{Code: "processing_error", Declines: -1, Card: "fp_visa"})
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clk, prov, &recoverytest.DeadLetters{}, recovery.DefaultPolicy())

	var outs []recovery.State
	for i := 1; i <= 3; i++ {
		p := h.declinedOn(fmt.Sprint("pay_v", i), "pm_tech", "processing_error", "visa", "fp_visa")
		outs = append(outs, h.recoverToEnd(p))
	}
	if got := []int{reattempts(outs[0]), reattempts(outs[1]), reattempts(outs[2])}; fmt.Sprint(got) != "[8 8 4]" {
		t.Fatalf("reattempts per payment %v, want [8 8 4]", got)
	}
	if calls, _, _ := prov.Snapshot(); len(calls) != 20 {
		t.Fatalf("the provider saw %d charge keys, want 20", len(calls))
	}
	last := outs[2].Plan
	if last.Retry || last.Reason != recovery.ReasonExhausted || last.Limit != recovery.LimitVisa30d ||
		!strings.Contains(last.Explanation, "Visa's limit of 20 reattempts per card in 30 days") ||
		!strings.Contains(last.Explanation, "the card may next be charged on") {
		t.Fatalf("the 21st reattempt's plan %+v, want refused by visa_30d, saying when the card may be charged", last)
	}
	card, err := cardledger.Get(context.Background(), h.store, payments.Table, "fp_visa")
	if err != nil {
		t.Fatal(err)
	}
	first := outs[0].Charges[1].At
	for _, c := range []struct {
		at   time.Time
		left int
	}{{clk.Now(), 0}, {first.Add(30*24*time.Hour - time.Second), 0}, {first.Add(30 * 24 * time.Hour), 1}} {
		if a := card.Allowance(c.at); a.Left != c.left || (c.left == 0 && (a.Limit != "visa_30d" || !a.NextAt.Equal(first.Add(30*24*time.Hour)))) {
			t.Errorf("allowance at %s: %+v, want %d left", c.at, a, c.left)
		}
	}
	rec, err := payments.GetRecovery(context.Background(), h.store, "pay_v3")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != payments.RecoveryStopped || rec.Limit != "visa_30d" || rec.Attempts != 5 || rec.DeadLetter == "" {
		t.Errorf("stored recovery %+v, want stopped by visa_30d after 5 attempts with its dead letter", rec)
	}
}

// TestMastercardCapAcrossPayments: one Mastercard card declines 9 times in one payment's
// recovery (the original charge and 8 retries); a second payment's original decline is the
// 10th in 24 hours, so its first retry waits until the oldest leaves the 24-hour window,
// named in the plan.
func TestMastercardCapAcrossPayments(t *testing.T) {
	clk := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm_mc", recoverytest.Script{Code: "processing_error", Declines: -1, Brand: "mastercard", Card: "fp_mc"})
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clk, prov, &recoverytest.DeadLetters{}, recovery.DefaultPolicy())

	first := h.declinedOn("pay_m1", "pm_mc", "processing_error", "mastercard", "fp_mc")
	out := h.recoverToEnd(first)
	if reattempts(out) != 8 {
		t.Fatalf("first recovery made %d retries, want 8", reattempts(out))
	}
	second := h.declinedOn("pay_m2", "pm_mc", "processing_error", "mastercard", "fp_mc")
	if err := h.rec.Declined(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	h.await(h.arn(second.Invoice))
	plan := h.pendingPlan()
	if want := first.UpdatedAt.Add(24 * time.Hour); !plan.Retry || plan.Limit != recovery.LimitMastercard24h ||
		!plan.At.Equal(want) || !strings.Contains(plan.Explanation, "Mastercard's limit of 10 declines per card in 24 hours") {
		t.Fatalf("second payment's plan %+v, want a retry at %s moved by mastercard_24h", plan, want)
	}
	card, err := cardledger.Get(context.Background(), h.store, payments.Table, "fp_mc")
	if err != nil {
		t.Fatal(err)
	}
	if a := card.Allowance(clk.Now()); a.Left != 0 || a.Limit != "mastercard_24h" || !a.NextAt.Equal(plan.At) {
		t.Fatalf("allowance %+v, want 0 left until %s", a, plan.At)
	}
	rec, err := payments.GetRecovery(context.Background(), h.store, "pay_m2")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != payments.RecoveryScheduled || !rec.NextAttemptAt.Equal(plan.At) || rec.Limit != "mastercard_24h" || rec.CardBrand != "mastercard" {
		t.Fatalf("stored recovery %+v", rec)
	}
	running, _, err := payments.ListRunningRecoveries(context.Background(), h.store, 10, "")
	if err != nil || len(running) != 1 || running[0].PaymentID != "pay_m2" {
		t.Fatalf("running recoveries %+v, %v; want pay_m2 only", running, err)
	}
}
