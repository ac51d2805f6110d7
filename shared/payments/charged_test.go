package payments

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// A create whose answer is late: while the call is out, the provider declines the payment, its
// decline event reaches the webhook worker, recovery charges it again and records the success.
// Then the create's own answers come in: a timeout (the outcome unknown, so the key goes
// pending), and, on the resolution, the provider's replay of what the first create did (the
// decline, as Stripe replays a key's saved answer). Neither is news about the payment: the
// charge came after both, so the payment stays succeeded, the event feed publishes no step
// back, and no recovery starts for it.
func TestLateCreateAnswerNeverUndoesACharge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := PaymentID("local", "k-late")
	pi := provider.Payment{ID: "pi_late", Amount: 1500, Currency: "usd", Customer: "cus_1", Created: created,
		Status: provider.StatusDeclined, Card: &provider.Card{Fingerprint: "fp_late", Brand: "visa", Last4: "4242"},
		Decline:  &provider.Decline{Code: "processing_error", ErrorCode: "processing_error"},
		Metadata: map[string]string{MetaPaymentID: id, MetaScope: "local"}}
	var charged Payment
	f.prov.outcome = func(req provider.CreateRequest, call int) (provider.Payment, error) {
		if call > 1 {
			return pi, &provider.DeclineError{Payment: pi} // the first create's answer, replayed
		}
		// Recovery's record of its charge, on the clock every writer shares, made while the
		// create's answer is still on its way.
		at := f.clock.Now().Add(300 * time.Millisecond)
		charged = Payment{ID: id, Scope: "local", Amount: 1500, Currency: "usd", Customer: "cus_1",
			ProviderPaymentID: pi.ID, CreatedAt: created, Version: EventVersion(created.Unix())}
		charged.Transition(provider.StatusSucceeded, nil, nil, VersionAt(at, provider.StatusSucceeded), at)
		w, err := charged.Put()
		if err == nil {
			err = f.svc.Store.Transact(ctx, w)
		}
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second) // the create times out a second later
		return provider.Payment{}, &provider.UnknownOutcomeError{Op: "create", IdempotencyKey: req.IdempotencyKey}
	}
	status := func() string {
		t.Helper()
		get := f.do(t, "GET", "/payments/"+id, "", "")
		var v View
		if get.Code != 200 || json.Unmarshal(get.Body.Bytes(), &v) != nil {
			t.Fatalf("GET %d %s", get.Code, get.Body)
		}
		return v.Status
	}

	if first := f.do(t, "POST", "/payments", "k-late", body("pm_late")); first.Code != 202 {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	if got := status(); got != provider.StatusSucceeded {
		t.Fatalf("after the create timed out the charged payment is %q", got)
	}
	f.drain(t)
	if len(f.jobs.list) != 1 {
		t.Fatalf("%d resolve jobs, want 1", len(f.jobs.list))
	}
	f.clock.Advance(time.Second)
	if err := f.svc.Resolve(ctx, f.jobs.list[0]); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	if got := status(); got != provider.StatusSucceeded {
		t.Fatalf("after the create's replayed decline the charged payment is %q", got)
	}
	// The key answers what the create did: the decline, replayed from now on.
	if again := f.do(t, "POST", "/payments", "k-late", body("pm_late")); again.Code != 402 || !strings.Contains(again.Body.String(), `"processing_error"`) {
		t.Fatalf("replay: %d %s", again.Code, again.Body)
	}
	for _, c := range f.changes {
		if c.Version > charged.Version {
			t.Errorf("the feed published %q at version %d, after the charge (%d)", c.Payment.Status, c.Version, charged.Version)
		}
	}
	if len(f.declines.ids) != 0 {
		t.Errorf("recovery started again for a charged payment: %v", f.declines.ids)
	}
}

// Nothing but a refund follows a charge: a report of any other status over a charged payment
// leaves it as it is, whatever its version, so its write loses the version check.
func TestTransitionNeverTakesBackACharge(t *testing.T) {
	at := created.Add(time.Hour)
	for _, from := range []string{provider.StatusSucceeded, provider.StatusRefunded} {
		for _, to := range []string{provider.StatusPending, provider.StatusProcessing, provider.StatusDeclined, provider.StatusRequiresAction, provider.StatusRequiresCapture, provider.StatusCanceled} {
			t.Run(from+" to "+to, func(t *testing.T) {
				p := Payment{ID: "pay_1", Status: from, Version: VersionAt(created, from), UpdatedAt: created}
				was := p
				p.Transition(to, &provider.Decline{Code: "processing_error"}, nil, VersionAt(at, to), at)
				if p.Status != was.Status || p.Version != was.Version || !p.UpdatedAt.Equal(was.UpdatedAt) || p.Decline != nil {
					t.Fatalf("%+v became %+v", was, p)
				}
			})
		}
	}
	p := Payment{ID: "pay_1", Status: provider.StatusRefunded, Version: VersionAt(created, provider.StatusRefunded)}
	p.Transition(provider.StatusSucceeded, nil, nil, VersionAt(at, provider.StatusSucceeded), at)
	if p.Status != provider.StatusSucceeded {
		t.Fatalf("a refund that failed later left %q", p.Status)
	}
}

// A create whose success answer comes in after the provider's events already recorded the
// payment and a refund of part of it (the answer was held up; the events were not): the answer
// is news about the charge, not about the refund, so the stored payment keeps its amount
// refunded and its dispute, and takes the request's details.
func TestLateCreateAnswerKeepsWhatEventsRecorded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := PaymentID("local", "k-late-refund")
	pi := provider.Payment{ID: "pi_late_refund", Amount: 1500, Currency: "usd", Customer: "cus_1", Created: created,
		Status: provider.StatusSucceeded, LatestCharge: "ch_late_refund",
		Metadata: map[string]string{MetaPaymentID: id, MetaScope: "local"}}
	f.prov.outcome = func(req provider.CreateRequest, call int) (provider.Payment, error) {
		// The worker's record from the provider's events: succeeded, then 500 refunded and a
		// dispute opened, while our call's answer is still on its way.
		at := f.clock.Now()
		ev := Payment{ID: id, Scope: "local", Amount: 1500, Currency: "usd", Customer: "cus_1", ProviderPaymentID: pi.ID,
			CreatedAt: created}
		ev.Transition(provider.StatusSucceeded, nil, nil, EventVersion(at.Unix()*16), at)
		ev.AmountRefunded, ev.Version = 500, ev.Version+1
		ev.Dispute = &Dispute{ID: "dp_1", Status: "needs_response", Amount: 1500}
		w, err := ev.Put()
		if err == nil {
			err = f.svc.Store.Transact(ctx, w)
		}
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
		return pi, nil
	}
	if first := f.do(t, "POST", "/payments", "k-late-refund", body("pm_late")); first.Code != 201 {
		t.Fatalf("create: %d %s", first.Code, first.Body)
	}
	p, err := Get(ctx, f.svc.Store, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != provider.StatusSucceeded || p.AmountRefunded != 500 || p.Dispute == nil || p.PaymentMethod != "pm_late" ||
		p.IdempotencyKey != "k-late-refund" || p.LatestCharge != "ch_late_refund" {
		t.Fatalf("after the late answer: %+v", p)
	}
}

// The same late decline over a charge that the provider's events and recovery recorded without
// the card (a success names none): the payment stays succeeded, and takes the card and the
// request's details from the answer, so the card's caps and last4 still show.
func TestLateDeclineLeavesItsCardOnTheCharge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := PaymentID("local", "k-late-card")
	card := &provider.Card{Fingerprint: "fp_late_card", Brand: "visa", Last4: "9995"}
	pi := provider.Payment{ID: "pi_late_card", Amount: 1500, Currency: "usd", Customer: "cus_1", Created: created,
		Status: provider.StatusDeclined, Card: card, Decline: &provider.Decline{Code: "insufficient_funds", ErrorCode: "card_declined"},
		Metadata: map[string]string{MetaPaymentID: id, MetaScope: "local"}}
	f.prov.outcome = func(req provider.CreateRequest, call int) (provider.Payment, error) {
		at := f.clock.Now()
		ev := Payment{ID: id, Scope: "local", Amount: 1500, Currency: "usd", ProviderPaymentID: pi.ID, CreatedAt: created}
		ev.Transition(provider.StatusSucceeded, nil, nil, VersionAt(at.Add(time.Second), provider.StatusSucceeded), at)
		w, err := ev.Put()
		if err == nil {
			err = f.svc.Store.Transact(ctx, w)
		}
		if err != nil {
			t.Fatal(err)
		}
		return pi, &provider.DeclineError{Payment: pi}
	}
	if first := f.do(t, "POST", "/payments", "k-late-card", body("pm_late")); first.Code != 402 {
		t.Fatalf("create: %d %s", first.Code, first.Body)
	}
	p, err := Get(ctx, f.svc.Store, id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != provider.StatusSucceeded || p.Card == nil || p.Card.Last4 != "9995" || p.PaymentMethod != "pm_late" || p.IdempotencyKey != "k-late-card" {
		t.Fatalf("after the late decline: %+v", p)
	}
}
