package stripesim_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recon"
)

// TestHealsAPaidDeclineWhateverItsVersion: a payment held as declined that the provider
// charged is healed to succeeded, even when its stored version is ahead of the reconciler's
// clock (a writer whose clock ran ahead recorded the decline). A success ends a PaymentIntent,
// so the provider's success is news over a decline whatever the two clocks say; a charged
// payment is never left reported as declined.
func TestHealsAPaidDeclineWhateverItsVersion(t *testing.T) {
	e := newEnv(t)
	e.rec.Healer = &payments.Applier{Store: e.store, Now: e.clock.Now, Log: slog.New(slog.DiscardHandler)}
	p := e.pay(1000, "", nil) // succeeded at the provider
	ahead := e.clock.Now().Add(7 * 24 * time.Hour)
	p.Status, p.Decline, p.UpdatedAt = provider.StatusDeclined, &provider.Decline{Code: "card_velocity_exceeded"}, ahead
	p.Version = payments.VersionAt(ahead, provider.StatusDeclined)
	e.write(p)

	e.clock.Advance(time.Hour)
	rep := e.run()
	if rep.Healed[recon.StatusMismatch] != 1 || total(rep.Opened) != 0 {
		t.Fatalf("healed %v opened %v; want the status mismatch healed", rep.Healed, rep.Opened)
	}
	got, err := payments.Get(context.Background(), e.store, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != provider.StatusSucceeded || got.Decline != nil {
		t.Fatalf("payment %s (decline %+v), want succeeded", got.Status, got.Decline)
	}
}
