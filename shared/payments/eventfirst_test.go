package payments

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
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
	pw, stale, err := svc.paymentWrite(ctx, answer)
	if err != nil || stale {
		t.Fatalf("paymentWrite: stale %v, %v", stale, err)
	}
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
	if pw, _, err := svc.paymentWrite(ctx, answer); err != nil || pw.Cond.Kind == store.VersionIs {
		t.Fatalf("second write %+v, %v: want the answer's own write, which the keeper drops as older", pw, err)
	}
}
