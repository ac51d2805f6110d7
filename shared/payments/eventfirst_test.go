package payments

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// The provider's event can be applied before the API's own commit of the same payment: the
// applier then makes the record from the event alone, with a later version, and the API's
// write of its answer is older. The answer must not be dropped whole: what only the request
// and its answer know (the capture method, the hold's deadline, the key) goes onto the
// stored record, whose status and version from the event stay ahead.
func TestAnswerFillsARecordAnEventMadeFirst(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	at := time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC)
	fromEvent := Payment{ID: "pay_1", Scope: "local", Amount: 2000, Currency: "usd", Customer: "cus_cap",
		ProviderPaymentID: "pi_1", Status: provider.StatusRequiresCapture, AmountCapturable: 2000,
		Version: VersionAt(at.Add(time.Second), provider.StatusRequiresCapture), CreatedAt: at}
	w, err := fromEvent.Put()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	answer := Payment{ID: "pay_1", Scope: "local", Amount: 2000, Currency: "usd", Customer: "cus_cap",
		IdempotencyKey: "cap-1", PaymentMethod: "pm_card_visa", CaptureMethod: CaptureManual, CreatedAt: at}
	answer.Observe(provider.Payment{ID: "pi_1", Status: provider.StatusRequiresCapture, AmountCapturable: 2000,
		CaptureBefore: at.Add(7 * 24 * time.Hour), Card: &provider.Card{Brand: "visa", Last4: "4242"}}, nil, at)
	if answer.Version >= fromEvent.Version {
		t.Fatalf("the answer's version %d is not older than the event's %d", answer.Version, fromEvent.Version)
	}
	svc := &Service{Store: s}
	r, err := svc.paymentWrite(ctx, answer)
	if err != nil || r.stale {
		t.Fatalf("paymentWrite: stale %v, %v", r.stale, err)
	}
	pw := r.write
	if pw.Cond.Kind != store.VersionIs || pw.Cond.Version != fromEvent.Version {
		t.Fatalf("write conditioned on %+v, want the stored version %d", pw.Cond, fromEvent.Version)
	}
	if err := s.Transact(ctx, pw); err != nil {
		t.Fatal(err)
	}
	got, err := Get(ctx, s, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.CaptureMethod != CaptureManual || !got.CaptureBefore.Equal(at.Add(7*24*time.Hour)) || got.PaymentMethod != "pm_card_visa" ||
		got.IdempotencyKey != "cap-1" || got.Status != provider.StatusRequiresCapture || got.Version != fromEvent.Version+1 {
		t.Fatalf("stored %+v", got)
	}
	// A second commit of the same answer (a retry of the final step) changes nothing more.
	if r, err := svc.paymentWrite(ctx, answer); err != nil || r.write.Put != nil {
		t.Fatalf("second write %+v, %v: want none, the record holds everything the answer knows", r.write, err)
	}
}

// raceStore runs afterRead once, right after a read of the payment finds nothing: the
// provider's event lands between the API's read and its commit.
type raceStore struct {
	store.Store
	id        string
	afterRead func()
}

func (r *raceStore) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	it, err := r.Store.Get(ctx, table, pk, sk)
	if table == Table && pk == r.id && errors.Is(err, store.ErrNotFound) && r.afterRead != nil {
		fn := r.afterRead
		r.afterRead = nil
		fn()
	}
	return it, err
}

// The provider's event can also land between the API's read of the payment and its commit, so
// the answer's write loses its condition. Its change message must not commit without it: a
// refund recorded one version above the event's shares the answer's version, and the feed
// would take the refund for a repeat and never publish it. The answer reads the payment again
// and fills it; every version on the feed is one stored state, and the last is the payment.
func TestAnswerThatLosesTheRaceReadsAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := PaymentID("local", "k-race")
	st := f.svc.Store
	rs := &raceStore{Store: st, id: id}
	f.svc.Store = rs
	var delivered []Change
	f.relay.Handlers[KindPublishChange] = func(_ context.Context, m outbox.Message) error {
		var c Change
		if err := json.Unmarshal(m.Payload, &c); err != nil {
			return err
		}
		delivered = append(delivered, c)
		return nil
	}
	var fromEvent Payment
	f.prov.outcome = func(req provider.CreateRequest, call int) (provider.Payment, error) {
		pay, err := outcomes(req, call)
		now := f.clock.Now()
		fromEvent = Payment{ID: id, Scope: "local", Amount: pay.Amount, Currency: pay.Currency, Customer: pay.Customer,
			ProviderPaymentID: pay.ID, CreatedAt: created, Metadata: req.Metadata}
		fromEvent.Transition(provider.StatusSucceeded, nil, nil,
			EventVersion(webhooks.StripeVersion(now.Unix(), "payment_intent.succeeded")), now)
		rs.afterRead = func() {
			pw, err := fromEvent.Put()
			if err != nil {
				t.Fatal(err)
			}
			cw, err := ChangeMessage(fromEvent, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Transact(ctx, pw, cw); err != nil {
				t.Fatal(err)
			}
		}
		return pay, err
	}
	if a := f.do(t, "POST", "/payments", "k-race", body("pm_card_visa")); a.Code != 201 {
		t.Fatalf("create: %d %s", a.Code, a.Body)
	}
	if rs.afterRead != nil {
		t.Fatal("the event never landed inside the race")
	}
	f.drain(t)
	got, err := Get(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.IdempotencyKey != "k-race" || got.PaymentMethod != "pm_card_visa" || got.Version != fromEvent.Version+1 {
		t.Fatalf("the answer did not fill the event's record: key %q method %q version %d (event %d)",
			got.IdempotencyKey, got.PaymentMethod, got.Version, fromEvent.Version)
	}

	// A refund, recorded one version above what it reads.
	if _, _, err := UpdateRefunds(ctx, st, RefundUpdate{PaymentID: id, Now: f.clock.Now(), Source: "webhook",
		Commit: func(ctx context.Context, ws []store.Write) error { return st.Transact(ctx, ws...) }},
		func(_ *Payment, l *RefundLedger) error {
			l.Report(provider.Refund{ID: "re_race", Payment: fromEvent.ProviderPaymentID, Amount: 700, Currency: "usd",
				Status: provider.RefundSucceeded}, f.clock.Now())
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	got, err = Get(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	views := map[int64]View{}
	for _, c := range delivered {
		if v, ok := views[c.Version]; ok && !reflect.DeepEqual(v, c.Payment) {
			t.Fatalf("two changes share version %d: %+v and %+v", c.Version, v, c.Payment)
		}
		views[c.Version] = c.Payment
	}
	last := delivered[len(delivered)-1]
	if last.Version != got.Version || last.Payment.AmountRefunded != 700 || !reflect.DeepEqual(last.Payment, got.View()) {
		t.Fatalf("the last change is version %d %+v; the payment is version %d %+v", last.Version, last.Payment, got.Version, got.View())
	}
}
