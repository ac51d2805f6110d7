package inprocess

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// TestSteeredChargeWithAFreshCardWhileTheOldIsCapped: a recovery waits days for a payday on a
// Visa card that other payments then take to Visa's 20 reattempts in 30 days. The customer
// attaches a fresh Mastercard (payment_method.attached): the steered charge is checked on
// the card it charges, so it happens within a minute of recovery time and succeeds, the
// payment's card is the new one (its ledger holds the attempt), and the old card's ledger is
// untouched, still at its cap.
func TestSteeredChargeWithAFreshCardWhileTheOldIsCapped(t *testing.T) {
	s := newStack(t, Config{TimeFactor: steerFactor})
	v, ex := parkedRecovery(t, s, "steer-fresh", "pm_steer_fresh")
	ctx := context.Background()
	declined, err := payments.Get(ctx, s.store, v.ID)
	if err != nil || declined.Card == nil {
		t.Fatalf("declined payment %+v, %v: want its card named", declined, err)
	}
	old := *declined.Card
	// Other payments use up the old card meanwhile.
	now := s.clock.Now()
	err = cardledger.Update(ctx, s.store, payments.Table, old.Fingerprint, old.Brand, func(c *cardledger.Card) ([]store.Write, error) {
		for i := range 20 {
			c.Record(cardledger.Entry{Key: fmt.Sprint("other-", i), At: now.Add(-time.Duration(20-i) * time.Minute),
				Result: cardledger.ResultDeclined, Reattempt: true, PaymentID: "pay_other", Recovery: "inv_other"}, now)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if before := paymentWithRecovery(t, s, v.ID); before.Card == nil || before.Card.AttemptsLeft == nil || *before.Card.AttemptsLeft != 0 {
		t.Fatalf("old card %+v, want 0 attempts left", before.Card)
	}

	customerEvent(t, s, "cus_rec", `{"type":"payment_method.attached","payment_method":"pm_card_mastercard"}`)
	done, err := awaitRecovery(t, s, ex) // a charge deferred by the old card's cap would wait a month: past its guard
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v: want the steered charge on the fresh card to end it", done, err)
	}
	steered, charged := stateEntered(t, s, ex, "Steer"), stateEntered(t, s, ex, "Charge")
	if steered.IsZero() || charged.Sub(steered) > time.Minute || charged.Before(steered) {
		t.Fatalf("steered at %s, charged at %s: want the charge within a minute of recovery time", steered, charged)
	}
	if evs := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(evs) != "[payment_failed succeeded]" {
		t.Fatalf("charges at the provider: %v, want the original and one more", evs)
	}
	got := paymentWithRecovery(t, s, v.ID)
	if got.Status != provider.StatusSucceeded || got.Card == nil || got.Card.Brand != "mastercard" || got.Card.Last4 != "4444" ||
		got.Card.AttemptsLeft == nil || *got.Card.AttemptsLeft != 10 {
		t.Fatalf("payment %s, card %+v: want succeeded on the mastercard, all 10 of its declines left (a success is no decline)", got.Status, got.Card)
	}
	stored, err := payments.Get(ctx, s.store, v.ID)
	if err != nil || stored.PaymentMethod != "pm_card_mastercard" || stored.Card == nil || stored.Card.Fingerprint == old.Fingerprint {
		t.Fatalf("stored payment %+v, %v: want pm_card_mastercard and its own card", stored, err)
	}
	fresh, err := cardledger.Get(ctx, s.store, payments.Table, stored.Card.Fingerprint)
	if err != nil || len(fresh.Entries) != 1 || fresh.Entries[0].PaymentID != v.ID || fresh.Entries[0].Result != cardledger.ResultSucceeded {
		t.Fatalf("new card ledger %+v, %v: want this payment's one succeeded attempt", fresh, err)
	}
	oldCard, err := cardledger.Get(ctx, s.store, payments.Table, old.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, e := range oldCard.Entries {
		if e.PaymentID == v.ID && e.Reattempt {
			mine++
		}
	}
	if mine != 0 || oldCard.Allowance(s.clock.Now()).Left != 0 {
		t.Fatalf("old card ledger %+v: want no reattempt of this payment, still at its cap", oldCard.Entries)
	}
	t.Logf("charged %s after the card update (recovery time), on %s", charged.Sub(steered), got.Card.Brand)
}
