package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// KindDisputeEvidence is the outbox kind that opens the dead-letter record of a dispute whose
// evidence is due (payload DisputeEvidence). It is committed with the dispute's state.
const KindDisputeEvidence = "dispute_evidence"

// DisputeEvidence is the payload of a KindDisputeEvidence message.
type DisputeEvidence struct {
	PaymentID         string           `json:"payment_id"`
	ProviderPaymentID string           `json:"provider_payment_id"`
	Amount            int64            `json:"amount"`
	Currency          string           `json:"currency"`
	EventID           string           `json:"event_id"`
	Dispute           payments.Dispute `json:"dispute"`
}

// amends reports whether ev amends a payment rather than reporting a status of its own:
// a refund (partial or whole) or a dispute.
func amends(ev webhooks.Event) bool {
	return ev.Type == provider.EventChargeRefunded && ev.Charge != nil || ev.Dispute != nil
}

// amend builds the payment's state after a refund or dispute event, or nil when the event names
// no payment of ours. A refund or dispute of a payment not created through twice is recorded
// only: reconciliation reports the payment itself.
func (w *Worker) amend(ctx context.Context, ev webhooks.Event, now time.Time) (*payments.Payment, error) {
	if (ev.PaymentIntent == nil || ev.PaymentIntent.ID == "") && ev.Dispute != nil && ev.Dispute.ChargeID != "" {
		// A dispute may name only the charge (its payment_intent null, as in Stripe's own
		// fixture): the charge's alias, written when we learned the charge, finds our payment.
		return w.amendByCharge(ctx, ev, now)
	}
	if ev.PaymentIntent == nil || ev.PaymentIntent.ID == "" {
		return nil, nil
	}
	pi := ev.PaymentIntent
	id := pi.Metadata[payments.MetaPaymentID]
	if id == "" {
		var err error
		id, err = payments.ByProviderID(ctx, w.Store, pi.ID)
		if errors.Is(err, payments.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	p, err := payments.Get(ctx, w.Store, id)
	switch {
	case errors.Is(err, payments.ErrNotFound):
		// A refund or dispute follows a success: the payment's own record must come first.
		return nil, fmt.Errorf("%w: %s", ErrPaymentNotYet, id)
	case err != nil:
		return nil, err
	}
	if p.ProviderPaymentID != "" && p.ProviderPaymentID != pi.ID {
		return nil, nil // a refund or dispute of another provider payment than ours (see paymentFor)
	}
	p.ProviderPaymentID = pi.ID
	if pi.LatestCharge != "" {
		p.LatestCharge = pi.LatestCharge
	}
	version := payments.EventVersion(ev.ObjectVersion)
	switch {
	case ev.Charge != nil:
		decide, err := w.refundsDecide(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if !decide {
			p.Refund(ev.Charge.AmountRefunded, version, now) // no news keeps the version: Stale
		}
	case ev.Dispute != nil:
		d := payments.Dispute{ID: capped(ev.Dispute.ID), Status: capped(ev.Dispute.Status), Reason: capped(ev.Dispute.Reason), Amount: ev.Dispute.Amount}
		if ev.Dispute.EvidenceDueBy > 0 && d.Status != provider.DisputeWon && d.Status != provider.DisputeLost {
			t := time.Unix(ev.Dispute.EvidenceDueBy, 0).UTC()
			d.EvidenceDueBy = &t
		}
		p.SetDispute(d, version, now)
	}
	return &p, nil
}

// amendByCharge is amend for a dispute that names only its charge.
func (w *Worker) amendByCharge(ctx context.Context, ev webhooks.Event, now time.Time) (*payments.Payment, error) {
	id, err := payments.ByProviderID(ctx, w.Store, ev.Dispute.ChargeID)
	if errors.Is(err, payments.ErrNotFound) {
		return nil, nil // a charge we never made or never heard of: reconciliation reports its payment
	}
	if err != nil {
		return nil, err
	}
	p, err := payments.Get(ctx, w.Store, id)
	if err != nil {
		return nil, err
	}
	if p.ProviderPaymentID == "" {
		return nil, nil // an alias names a payment that never reached the provider: nothing to dispute
	}
	ev.PaymentIntent = &webhooks.PaymentIntent{ID: p.ProviderPaymentID, Amount: ev.Dispute.Amount, Currency: ev.Dispute.Currency,
		Metadata: map[string]string{payments.MetaPaymentID: p.ID}}
	return w.amend(ctx, ev, now)
}

// amendFollowOns is the follow-on work an amendment requires, for the same transaction: a
// dispute that waits for evidence opens one dead-letter record (its id names the dispute, so
// every later event of the same dispute writes the same message).
func amendFollowOns(ev webhooks.Event, p *payments.Payment, now time.Time) ([]store.Write, error) {
	if ev.Dispute == nil || !p.Dispute.NeedsResponse() {
		return nil, nil
	}
	m, err := outbox.New(KindDisputeEvidence, "dispute#"+p.Dispute.ID+"#evidence", DisputeEvidence{
		PaymentID: p.ID, ProviderPaymentID: p.ProviderPaymentID, Amount: p.Amount, Currency: p.Currency,
		EventID: ev.ID, Dispute: *p.Dispute}, now)
	if err != nil {
		return nil, err
	}
	return []store.Write{m}, nil
}

// maxField caps a provider string kept on the payment (ids, statuses, reasons are far shorter).
const maxField = 64

func capped(s string) string {
	if len(s) <= maxField {
		return s
	}
	return s[:maxField]
}
