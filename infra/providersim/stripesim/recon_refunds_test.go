package stripesim_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// refund refunds amount of p at the provider (the simulator, through the Stripe adapter).
func (e *env) refund(p payments.Payment, amount int64, meta map[string]string) provider.Refund {
	e.t.Helper()
	e.seq++
	rf, err := e.prov.Refund(context.Background(), provider.RefundRequest{Payment: p.ProviderPaymentID, Amount: amount,
		Metadata: meta, IdempotencyKey: fmt.Sprintf("refund-key-%d", e.seq)})
	if err != nil {
		e.t.Fatal(err)
	}
	return rf
}

// ledger writes entries onto p's refund ledger the way the payments API does (UpdateRefunds),
// so the payment's amount refunded follows.
func (e *env) ledger(p payments.Payment, entries ...payments.RefundEntry) {
	e.t.Helper()
	u := payments.RefundUpdate{PaymentID: p.ID, Now: e.clock.Now(), Source: "api",
		Commit: func(ctx context.Context, ws []store.Write) error { return e.store.Transact(ctx, ws...) }}
	if _, _, err := payments.UpdateRefunds(context.Background(), e.store, u, func(_ *payments.Payment, l *payments.RefundLedger) error {
		l.Refunds = append(l.Refunds, entries...)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) withHealer() {
	e.rec.Healer = &payments.Applier{Store: e.store, Now: e.clock.Now, Log: slog.New(slog.DiscardHandler)}
}

func (e *env) opened(c recon.Kind) []recon.Difference {
	var out []recon.Difference
	for _, d := range e.sink.all() {
		if d.Kind == c {
			out = append(out, d)
		}
	}
	return out
}

// 150 refunds of one payment at the provider that our ledger never heard of (their webhooks
// were lost): the run walks both pages of the provider's refund list, heals each through the
// refund path every refund event takes, and the ledger, amount refunded and status follow. Payments
// without refunds on either side cost no refund list call, and the next run finds nothing.
func TestRefundsMissingLocallyHealAcrossListPages(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 150 refunds")
	}
	e := newEnv(t)
	e.withHealer()
	for range 3 {
		e.pay(1000, "", nil) // no refunds anywhere
	}
	p := e.pay(20000, "", nil)
	const n = 150 // more than one page of the provider's list (100)
	for range n {
		e.refund(p, 100, nil)
	}
	e.clock.Advance(time.Hour)
	before := e.lists.refundPages()
	rep := e.run()
	if pages := e.lists.refundPages() - before; pages != 2 {
		t.Errorf("%d refund list pages, want 2: one payment has refunds, and 150 take two pages", pages)
	}
	if rep.Found[recon.RefundMissingLocally] != n || rep.Healed[recon.RefundMissingLocally] != n || total(rep.Opened) != 0 {
		t.Fatalf("found %v healed %v opened %v; want %d refunds missing locally, all healed", rep.Found, rep.Healed, rep.Opened, n)
	}
	if total(rep.Found) != n {
		t.Fatalf("found %v: the payment's refunded figure must not be a second difference", rep.Found)
	}
	l, err := payments.GetRefunds(context.Background(), e.store, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := payments.Get(context.Background(), e.store, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Refunds) != n || l.Refunded() != n*100 || got.AmountRefunded != n*100 || got.Status != provider.StatusSucceeded {
		t.Fatalf("ledger %d refunds, %d refunded; payment %s with %d refunded", len(l.Refunds), l.Refunded(), got.Status, got.AmountRefunded)
	}
	e.clock.Advance(time.Hour)
	if next := e.run(); total(next.Found) != 0 {
		t.Fatalf("after healing, the next run found %v", next.Found)
	}
}

// Without a healer, a provider refund our ledger lacks is reported, with the refund named, a
// plain explanation and an action, and opened once across overlapping runs.
func TestRefundMissingLocallyIsReportedWithoutAHealer(t *testing.T) {
	e := newEnv(t)
	p := e.pay(2000, "", nil)
	rf := e.refund(p, 700, nil)
	e.clock.Advance(time.Hour)
	rep := e.run()
	got := e.opened(recon.RefundMissingLocally)
	if rep.Opened[recon.RefundMissingLocally] != 1 || len(got) != 1 || total(rep.Found) != 1 {
		t.Fatalf("found %v opened %v", rep.Found, rep.Opened)
	}
	d := got[0]
	if d.PaymentID != p.ID || d.Refund == nil || d.Refund.Provider == nil || d.Refund.Provider.ID != rf.ID ||
		!strings.Contains(d.Explanation, rf.ID) || !strings.Contains(d.Explanation, "700 usd") || !strings.Contains(d.SuggestedAction, "Replay") {
		t.Fatalf("difference %+v", d)
	}
	e.clock.Advance(time.Hour)
	if next := e.run(); next.Found[recon.RefundMissingLocally] != 1 || total(next.Opened) != 0 {
		t.Fatalf("overlapping run: found %v opened %v", next.Found, next.Opened)
	}
}

// A reservation whose caller got a 202 and never repeated the request, and a refund we hold as
// succeeded that the provider does not have, are reported with what to do, even with a healer:
// only a person can decide. The provider's payment shows nothing refunded, yet the ledger
// alone makes the run list its refunds. A reservation younger than the grace is in flight.
func TestRefundsMissingAtProviderAreReported(t *testing.T) {
	e := newEnv(t)
	e.withHealer()
	reserved := e.pay(2000, "", nil)
	made := e.clock.Now()
	e.ledger(reserved, payments.RefundEntry{ID: "rf_reserved", Key: "order-9-refund", ProviderKey: "pk", Amount: 500, Currency: "usd",
		Status: provider.RefundReserved, CreatedAt: made, UpdatedAt: made})
	phantom := e.pay(3000, "", nil)
	e.ledger(phantom, payments.RefundEntry{ID: "rf_phantom", ProviderRefundID: "re_phantom", Key: "k2", Amount: 3000, Currency: "usd",
		Status: provider.RefundSucceeded, CreatedAt: made, UpdatedAt: made})

	e.clock.Advance(6 * time.Minute) // the window ends 5 minutes ago: it holds them, the grace does too
	if rep := e.run(); total(rep.Found) != 0 {
		t.Fatalf("within the grace: found %v", rep.Found)
	}
	e.clock.Advance(time.Hour)
	before := e.lists.refundPages()
	rep := e.run()
	if pages := e.lists.refundPages() - before; pages != 2 {
		t.Errorf("%d refund list pages, want 2 (one per payment with a ledger)", pages)
	}
	if rep.Found[recon.RefundMissingAtProvider] != 2 || rep.Opened[recon.RefundMissingAtProvider] != 2 || total(rep.Healed) != 0 || total(rep.Found) != 2 {
		t.Fatalf("found %v opened %v healed %v", rep.Found, rep.Opened, rep.Healed)
	}
	byPayment := map[string]recon.Difference{}
	for _, d := range e.opened(recon.RefundMissingAtProvider) {
		byPayment[d.PaymentID] = d
	}
	r := byPayment[reserved.ID]
	if !strings.Contains(r.Explanation, "202") || !strings.Contains(r.Explanation, `"order-9-refund"`) || !strings.Contains(r.Explanation, "500 usd") ||
		!strings.Contains(r.SuggestedAction, "POST /payments/"+reserved.ID+"/refunds with Idempotency-Key \"order-9-refund\"") {
		t.Fatalf("reserved refund: %q / %q", r.Explanation, r.SuggestedAction)
	}
	ph := byPayment[phantom.ID]
	if !strings.Contains(ph.Explanation, "re_phantom") || !strings.Contains(ph.Explanation, "not have got the money back") ||
		!strings.Contains(ph.SuggestedAction, "new Idempotency-Key") {
		t.Fatalf("phantom refund: %q / %q", ph.Explanation, ph.SuggestedAction)
	}
	l, _ := payments.GetRefunds(context.Background(), e.store, reserved.ID)
	if len(l.Refunds) != 1 || l.Refunds[0].Status != provider.RefundReserved {
		t.Fatalf("a reported refund changed: %+v", l.Refunds)
	}
}

// Our reservation whose provider call did go through (the answer was lost): the provider's
// refund carries our id in its metadata, is matched to it, and heals it forward. A refund we
// hold further along than the provider (failed here, succeeded there) is reported instead.
func TestRefundStatusDifferences(t *testing.T) {
	e := newEnv(t)
	e.withHealer()
	behind := e.pay(2000, "", nil)
	made := e.clock.Now()
	e.ledger(behind, payments.RefundEntry{ID: "rf_behind", Key: "k1", Amount: 800, Currency: "usd", Status: provider.RefundReserved,
		CreatedAt: made, UpdatedAt: made})
	up := e.refund(behind, 800, map[string]string{payments.MetaRefundID: "rf_behind", payments.MetaPaymentID: behind.ID})

	ahead := e.pay(2000, "", nil)
	there := e.refund(ahead, 400, nil)
	e.ledger(ahead, payments.RefundEntry{ID: there.ID, ProviderRefundID: there.ID, Amount: 400, Currency: "usd",
		Status: provider.RefundFailed, FailureReason: "declined", CreatedAt: made, UpdatedAt: made})

	e.clock.Advance(time.Hour)
	rep := e.run()
	if rep.Found[recon.RefundStatusMismatch] != 2 || rep.Healed[recon.RefundStatusMismatch] != 1 || rep.Opened[recon.RefundStatusMismatch] != 1 ||
		total(rep.Found) != 2 {
		t.Fatalf("found %v healed %v opened %v", rep.Found, rep.Healed, rep.Opened)
	}
	l, _ := payments.GetRefunds(context.Background(), e.store, behind.ID)
	p, _ := payments.Get(context.Background(), e.store, behind.ID)
	if len(l.Refunds) != 1 || l.Refunds[0].Status != provider.RefundSucceeded || l.Refunds[0].ProviderRefundID != up.ID || p.AmountRefunded != 800 {
		t.Fatalf("healed ledger %+v, payment refunded %d", l.Refunds, p.AmountRefunded)
	}
	got := e.opened(recon.RefundStatusMismatch)
	if len(got) != 1 || got[0].PaymentID != ahead.ID || !strings.Contains(got[0].Explanation, "failed in our records") ||
		!strings.Contains(got[0].Explanation, "succeeded at the provider") {
		t.Fatalf("opened %+v", got)
	}
}

// The dead-letter record of a refund difference speaks of the refund's two sides, not the
// payment's, and its class has its own text.
func TestRefundDifferenceDeadLetterFacts(t *testing.T) {
	var opened deadletter.Record
	sink := recon.DeadLetterRecords{Records: openerFunc(func(_ context.Context, r deadletter.Record) (deadletter.Record, bool, error) {
		opened = r
		return r, true, nil
	})}
	d := recon.Difference{Key: "diff_x", Kind: recon.RefundMissingAtProvider, PaymentID: "pay_1",
		Local:       &payments.Payment{ID: "pay_1", Status: provider.StatusSucceeded},
		Refund:      &recon.RefundEvidence{Local: &payments.RefundEntry{ID: "rf_1", Amount: 500, Currency: "usd", Status: provider.RefundReserved}},
		Explanation: "e", SuggestedAction: "a"}
	if err := sink.Open(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if opened.Cause != deadletter.CauseReconRefundMissingAtProvider || opened.Facts.Local != "500 usd reserved" || opened.Facts.Remote != "" {
		t.Fatalf("record class %s facts %+v", opened.Cause, opened.Facts)
	}
	text, _ := deadletter.Explain(opened.Cause, opened.Facts)
	if !strings.Contains(text, "500 usd reserved") {
		t.Fatalf("text %q", text)
	}
}

type openerFunc func(ctx context.Context, r deadletter.Record) (deadletter.Record, bool, error)

func (f openerFunc) Open(ctx context.Context, r deadletter.Record) (deadletter.Record, bool, error) {
	return f(ctx, r)
}

// A run reads its paid payments' refunds Readers at a time, and still compares every one.
// One after another, a run of a few hundred payments under throttling (go run ./infra/chaos
// -throttle 0.1 -payments 600) outlasted its 29 s deadline, each refused call's backoff added
// to the rest, and the authorizations it would have named were never surfaced.
func TestRefundsOfPaymentsAreReadSideBySide(t *testing.T) {
	e := newEnv(t)
	var phantoms []payments.Payment
	for i := range 3 * recon.DefaultReaders {
		p := e.pay(1000+int64(i), "", nil)
		made := e.clock.Now()
		e.ledger(p, payments.RefundEntry{ID: fmt.Sprintf("rf_%d", i), ProviderRefundID: fmt.Sprintf("re_phantom_%d", i), Key: fmt.Sprintf("k%d", i),
			Amount: 500, Currency: "usd", Status: provider.RefundSucceeded, CreatedAt: made, UpdatedAt: made})
		phantoms = append(phantoms, p)
	}
	// Only the refund ledgers' reads wait: the run's other reads are one after another.
	gated := storetest.NewGate(e.rec.Store, recon.DefaultReaders, func(_, pk string) bool { return strings.HasPrefix(pk, "refunds#") })
	e.rec.Store = gated
	e.clock.Advance(time.Hour + 6*time.Minute)
	// Bounded so that a run reading one ledger at a time fails here instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := e.rec.Run(ctx, e.rec.DefaultWindow())
	if err != nil {
		t.Fatalf("run: %v (most ledger reads in flight: %d, want %d)", err, gated.Most(), recon.DefaultReaders)
	}
	if gated.Most() != recon.DefaultReaders {
		t.Errorf("at most %d ledger reads in flight, want %d", gated.Most(), recon.DefaultReaders)
	}
	if got := rep.Found[recon.RefundMissingAtProvider]; got != len(phantoms) {
		t.Fatalf("found %v, want %d refunds missing at the provider", rep.Found, len(phantoms))
	}
}
