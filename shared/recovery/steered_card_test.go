package recovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/store"
)

// fillCard records n declined reattempts of another payment on a card, one a minute ending
// at last.
func fillCard(t *testing.T, st *boltstore.Store, fp, brand string, n int, last time.Time) {
	t.Helper()
	err := cardledger.Update(context.Background(), st, payments.Table, fp, brand, func(c *cardledger.Card) ([]store.Write, error) {
		for i := range n {
			at := last.Add(-time.Duration(n-1-i) * time.Minute)
			c.Record(cardledger.Entry{Key: fmt.Sprintf("other-%d", i), At: at, Result: cardledger.ResultDeclined,
				Reattempt: true, PaymentID: "pay_other", Recovery: "inv_other"}, last)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func ledger(t *testing.T, st *boltstore.Store, fp string) cardledger.Card {
	t.Helper()
	c, err := cardledger.Get(context.Background(), st, payments.Table, fp)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// steeredCharge is the charge step's input after a steering signal asked for pm_new: the
// original decline on the old card, then a charge planned now.
func steeredCharge(t *testing.T, now time.Time) json.RawMessage {
	t.Helper()
	in, err := json.Marshal(map[string]any{"step": recovery.StepCharge, "state": recovery.State{
		PaymentID: "pay_1", Invoice: "inv_pay_1", Round: 1, PaymentMethod: "pm_new",
		Charges: []recovery.Charge{{At: t0, Result: recovery.ResultDeclined, Class: "technical", Card: "fp_old"}},
		Plan:    &recovery.Plan{Retry: true, At: now, Attempt: 2, Reason: recovery.ReasonSteered}}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func declinedOnOldCard(t *testing.T, st *boltstore.Store) {
	t.Helper()
	putPayment(t, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, Customer: "cus_1", Invoice: "inv_pay_1",
		PaymentMethod: "pm_old", ProviderPaymentID: "pi_1", Amount: 1000, Currency: "usd",
		Decline:   &provider.Decline{Code: "processing_error", ErrorCode: "processing_error", Network: "visa"},
		Card:      &payments.CardRef{Fingerprint: "fp_old", Brand: "visa", Last4: "0002"},
		CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)})
}

// A steered charge with a new card is checked on the new card: the old card is at Visa's 20
// reattempts in 30 days, the new Mastercard is free, so the charge goes through, and it is
// recorded on the new card's ledger only. The payment then names the new card.
func TestSteeredChargeIsCheckedOnTheNewCard(t *testing.T) {
	clk := clock.NewFake(t0.Add(time.Hour))
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm_new", recoverytest.Script{Brand: "mastercard", Card: "fp_new"})
	steps, st, _ := newSteps(t, prov, clk)
	declinedOnOldCard(t, st)
	fillCard(t, st, "fp_old", "visa", 20, clk.Now().Add(-time.Minute))
	if a := ledger(t, st, "fp_old").Allowance(clk.Now()); a.Left != 0 || a.Limit != "visa_30d" {
		t.Fatalf("old card allowance %+v, want capped by visa_30d", a)
	}

	out := handleState(t, steps, steeredCharge(t, clk.Now()))
	if out.Result != recovery.ResultSucceeded {
		t.Fatalf("outcome %s, plan %+v: want the charge on the free new card to succeed", out.Result, out.Plan)
	}
	if _, _, effects := prov.Snapshot(); effects["pm_new"] != 1 {
		t.Fatalf("charges per payment method %v, want pm_new once", effects)
	}
	key := provider.AttemptKey("inv_pay_1", 2)
	newCard := ledger(t, st, "fp_new")
	if len(newCard.Entries) != 1 || newCard.Entries[0].Key != key || newCard.Entries[0].Result != cardledger.ResultSucceeded ||
		newCard.Entries[0].PaymentID != "pay_1" || newCard.Brand != "mastercard" {
		t.Fatalf("new card ledger %+v, want the succeeded attempt %s of pay_1", newCard, key)
	}
	if old := ledger(t, st, "fp_old"); len(old.Entries) != 20 || old.Has(key) {
		t.Fatalf("old card ledger has %d entries (attempt recorded: %v), want its 20 untouched", len(old.Entries), old.Has(key))
	}
	if a := out.Charges[len(out.Charges)-1]; a.Card != "fp_new" {
		t.Fatalf("the attempt is marked on card %q, want fp_new", a.Card)
	}
	p, err := payments.Get(context.Background(), st, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != provider.StatusSucceeded || p.PaymentMethod != "pm_new" || p.Card == nil || p.Card.Fingerprint != "fp_new" || p.Card.Brand != "mastercard" {
		t.Fatalf("stored payment %+v (card %+v), want succeeded on pm_new's card", p, p.Card)
	}
	// GET /payments/{id}'s card object is read from this card: the new card's allowance.
	v, err := payments.CardViewOf(context.Background(), st, *p.Card, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(v); !strings.Contains(string(b), `"mastercard"`) {
		t.Fatalf("card view %s, want the new mastercard", b)
	}
	if prov.CardReads() != 1 {
		t.Fatalf("the provider was asked for %d payment method cards, want 1", prov.CardReads())
	}
}

// A steered charge on a new card that is itself capped is deferred by the new card's cap,
// named, to the moment the new card's allowance gives, though the old card is free; neither
// ledger gets the attempt.
func TestSteeredChargeOnACappedNewCardIsDeferredByItsCap(t *testing.T) {
	clk := clock.NewFake(t0.Add(time.Hour))
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm_new", recoverytest.Script{Brand: "mastercard", Card: "fp_new"})
	steps, st, _ := newSteps(t, prov, clk)
	declinedOnOldCard(t, st)
	fillCard(t, st, "fp_new", "mastercard", 10, clk.Now().Add(-time.Minute))
	allowance := ledger(t, st, "fp_new").Allowance(clk.Now())
	if allowance.Left != 0 || allowance.Limit != "mastercard_24h" {
		t.Fatalf("new card allowance %+v, want capped by mastercard_24h", allowance)
	}

	out := handleState(t, steps, steeredCharge(t, clk.Now()))
	plan := out.Plan
	if plan == nil || !plan.Retry || plan.Limit != recovery.LimitMastercard24h || !plan.At.Equal(allowance.NextAt) ||
		!strings.Contains(plan.Explanation, "Mastercard's limit of 10 declines per card in 24 hours") {
		t.Fatalf("plan %+v, want a retry at %s moved by mastercard_24h", plan, allowance.NextAt)
	}
	if out.PaymentMethod != "pm_new" {
		t.Fatalf("the deferred plan lost the steered payment method: %q", out.PaymentMethod)
	}
	if calls, _, _ := prov.Snapshot(); len(calls) != 0 {
		t.Fatalf("the provider was charged %v, want nothing", calls)
	}
	key := provider.AttemptKey("inv_pay_1", 2)
	if ledger(t, st, "fp_new").Has(key) || len(ledger(t, st, "fp_old").Entries) != 0 {
		t.Fatalf("a ledger got the deferred attempt: new %+v, old %+v", ledger(t, st, "fp_new"), ledger(t, st, "fp_old"))
	}
	rec, err := payments.GetRecovery(context.Background(), st, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != payments.RecoveryScheduled || rec.Limit != "mastercard_24h" || rec.CardBrand != "mastercard" || !rec.NextAttemptAt.Equal(plan.At) {
		t.Fatalf("stored recovery %+v, want scheduled on the mastercard by mastercard_24h", rec)
	}
}

// The steer step plans "charge now" from the card it will charge: the old card's cap does
// not delay a charge on a free new card.
func TestSteerPlansFromTheNewCard(t *testing.T) {
	clk := clock.NewFake(t0.Add(time.Hour))
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm_new", recoverytest.Script{Brand: "mastercard", Card: "fp_new"})
	steps, st, _ := newSteps(t, prov, clk)
	declinedOnOldCard(t, st)
	fillCard(t, st, "fp_old", "visa", 20, clk.Now().Add(-time.Minute))
	sg := recovery.Steer{PaymentID: "pay_1", Action: recovery.ActionChargeNow, Reason: recovery.ReasonPaymentMethodUpdated,
		PaymentMethod: "pm_new", At: clk.Now()}
	w, err := sg.Write()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Transact(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"step": recovery.StepSteer, "state": recovery.State{
		PaymentID: "pay_1", Invoice: "inv_pay_1", Round: 1,
		Charges: []recovery.Charge{{At: t0, Result: recovery.ResultDeclined, Class: "technical", Card: "fp_old"}},
		Plan:    &recovery.Plan{Retry: true, At: t0.Add(48 * time.Hour), Attempt: 2, Reason: recovery.ReasonBackoff}}})
	out := handleState(t, steps, in)
	if want := clk.Now().Add(time.Second); out.Plan == nil || !out.Plan.Retry || !out.Plan.At.Equal(want) || out.Plan.Limit != "" ||
		out.PaymentMethod != "pm_new" || !strings.HasPrefix(out.Plan.Explanation, "Charging now") {
		t.Fatalf("steered plan %+v (payment method %q), want a charge at %s with pm_new and no cap", out.Plan, out.PaymentMethod, want)
	}
	rec, err := payments.GetRecovery(context.Background(), st, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.CardBrand != "mastercard" {
		t.Fatalf("stored recovery names card brand %q, want the new card's mastercard", rec.CardBrand)
	}
}

// The planner counts this recovery's attempts only on their own card: attempts marked with
// the declined card do not spend the new card's Mastercard allowance; unmarked ones (a card
// not known) still count, the safe reading.
func TestPlannerCountsOwnAttemptsOnTheirCard(t *testing.T) {
	c := declines.Classify(declines.FromProvider(provider.Decline{Code: "processing_error", ErrorCode: "processing_error", Network: "mastercard"}))
	now := t0.Add(time.Hour)
	var others []recovery.Charge
	for i := range 9 {
		others = append(others, recovery.Charge{At: now.Add(-time.Duration(30-i) * time.Minute), Result: recovery.ResultDeclined, Reattempt: true})
	}
	for name, tc := range map[string]struct {
		attemptCard string
		wantLimit   recovery.Limit
	}{
		"own attempt on the old card":   {attemptCard: "fp_old", wantLimit: ""},
		"own attempt on the new card":   {attemptCard: "fp_new", wantLimit: recovery.LimitMastercard24h},
		"own attempt on a card unknown": {attemptCard: "", wantLimit: recovery.LimitMastercard24h},
	} {
		t.Run(name, func(t *testing.T) {
			in := recovery.Input{Classification: c, Card: "fp_new", CardCharges: others,
				Charges: []recovery.Charge{{At: now.Add(-10 * time.Minute), Result: recovery.ResultDeclined, Class: c.Class, Card: tc.attemptCard}}}
			plan, err := recovery.NextAttempt(recovery.DefaultPolicy(), in, now, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Retry || plan.Limit != tc.wantLimit {
				t.Fatalf("plan %+v, want a retry with limit %q", plan, tc.wantLimit)
			}
		})
	}
}

// handleState runs one step and decodes the state it answers.
func handleState(t *testing.T, steps *recovery.Steps, in []byte) recovery.State {
	t.Helper()
	raw, err := steps.Handle(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var out recovery.State
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
