package worker

import (
	"context"
	"fmt"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/webhooks"
)

// Settle applies the provider's current view of a payment through the same path as a
// delivery: as the event that reports its state (a refund, whole or partial, as
// charge.refunded with the amount refunded), created now, under eventID (a deterministic id
// of the caller's: reconciliation uses its run and the difference, so settling twice is a
// duplicate). The dedupe records, the ordering guard and the follow-on work are the
// worker's own. An outcome other than Applied means it changed nothing.
func (w *Worker) Settle(ctx context.Context, p provider.Payment, eventID string) (Outcome, error) {
	// A payment waiting for its customer or for a capture has no settled state to record.
	typ := provider.StatusEvent(p.Status)
	ok := typ != "" && p.Status != provider.StatusPending && p.Status != provider.StatusRequiresAction &&
		p.Status != provider.StatusRequiresCapture
	if p.Status == provider.StatusSucceeded && p.AmountRefunded > 0 {
		typ = provider.EventChargeRefunded
	}
	if !ok || p.ID == "" || eventID == "" {
		return "", fmt.Errorf("worker: nothing to settle for %s (%s): %w", p.ID, p.Status, webhooks.ErrBadPayload)
	}
	now := w.now().UTC()
	pi := &webhooks.PaymentIntent{ID: p.ID, Status: string(p.Status), Amount: p.Amount, Currency: p.Currency,
		Customer: p.Customer, Metadata: p.Metadata}
	if d := p.Decline; d != nil {
		pi.LastPaymentError = &webhooks.PaymentError{Code: d.ErrorCode, DeclineCode: d.Code, AdviceCode: d.AdviceCode,
			NetworkAdviceCode: d.NetworkAdviceCode, NetworkDeclineCode: d.NetworkDeclineCode}
	}
	ev := webhooks.Event{Provider: webhooks.ProviderStripe, ID: eventID, Type: typ, ObjectType: "payment_intent", ObjectID: p.ID,
		ObjectVersion: webhooks.StripeVersion(now.Unix(), typ), Created: now, PaymentIntent: pi}
	if typ == provider.EventChargeRefunded {
		refunded := p.AmountRefunded
		if p.Status == provider.StatusRefunded && refunded == 0 {
			refunded = p.Amount // refunded in full, by the provider's word
		}
		ev.Charge = &webhooks.Charge{PaymentIntentID: p.ID, Amount: p.Amount, AmountRefunded: refunded, Refunded: refunded >= p.Amount}
	}
	return w.apply(ctx, ev)
}
