package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Amendments: provider changes that add to a payment without being a status of its own
// (refunds, disputes). They go through the same version rule as Transition.

// Dispute is the state of a dispute of the payment's charge, as the provider reported it last.
type Dispute struct {
	ID     string `json:"id"`
	Status string `json:"status"` // Stripe's: provider.DisputeNeedsResponse, DisputeWon, ...
	Reason string `json:"reason,omitempty"`
	Amount int64  `json:"amount"`
	// EvidenceDueBy is when the evidence must be submitted, while a response is needed.
	EvidenceDueBy *time.Time `json:"evidence_due_by,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// NeedsResponse reports whether the dispute waits for our evidence: a person must act before
// EvidenceDueBy, so applying it opens a dead-letter record for it (KindDisputeEvidence).
func (d *Dispute) NeedsResponse() bool {
	return d != nil && (d.Status == provider.DisputeNeedsResponse || d.Status == provider.DisputeWarningNeedsResponse)
}

// Refund applies a refund report: the charge's cumulative amount refunded. The rule:
//   - a refund of the whole amount makes the payment refunded;
//   - a partial refund leaves it succeeded (a refunded charge was a successful one, so a payment
//     we still held as pending, processing or declined becomes succeeded) and records the amount;
//   - refunded amounts only grow, so a report of more than we hold is news even within the same
//     second of the provider's clock (two partial refunds in one second): its version is then
//     raised just above the stored one. A report of no more than we hold keeps the stored version
//     and so loses the version check (an old or repeated report).
//
// It reports whether the report was news.
func (p *Payment) Refund(amountRefunded, version int64, at time.Time) bool {
	if amountRefunded <= p.AmountRefunded {
		return false
	}
	if version <= p.Version {
		version = p.Version + 1
	}
	st := provider.StatusSucceeded
	if amountRefunded >= p.Amount {
		st = provider.StatusRefunded
	}
	p.AmountRefunded = amountRefunded
	p.Status, p.Version, p.UpdatedAt = st, version, at.UTC()
	if st == provider.StatusSucceeded {
		p.Decline, p.DeclineClass = nil, ""
	}
	return true
}

// SetDispute records a dispute's new state at version (the event's). The payment's status does
// not change: a disputed payment was paid; whether the money stays is the dispute's outcome
// (Dispute.Status won or lost), shown beside the status. Only a successful charge can be
// disputed, so a payment we still held as pending, processing or declined (its success event
// not applied yet, or lost) becomes succeeded, as a refund makes it. As with refunds, a report
// that moves the same dispute further along its lifecycle (provider.DisputeRank; a dispute never
// moves back) is news even within the same second of the provider's clock (two
// charge.dispute.updated events in one second share a version): its version is then raised just
// above the stored one. Any other report keeps the event's version, and an old or repeated one
// loses the version check.
func (p *Payment) SetDispute(d Dispute, version int64, at time.Time) {
	if version <= p.Version && p.Dispute != nil && p.Dispute.ID == d.ID &&
		provider.DisputeRank(d.Status) > provider.DisputeRank(p.Dispute.Status) {
		version = p.Version + 1
	}
	d.UpdatedAt = at.UTC()
	p.Dispute = &d
	p.Version, p.UpdatedAt = version, at.UTC()
	if p.Status != provider.StatusSucceeded && p.Status != provider.StatusRefunded {
		p.Status, p.Decline, p.DeclineClass = provider.StatusSucceeded, nil, ""
	}
}

// KindDisputeEvidence is the outbox kind that opens the dead-letter record of a dispute whose
// evidence is due (payload DisputeEvidence). It is committed with the dispute's state.
const KindDisputeEvidence = "dispute_evidence"

// DisputeEvidence is the payload of a KindDisputeEvidence message.
type DisputeEvidence struct {
	PaymentID         string  `json:"payment_id"`
	ProviderPaymentID string  `json:"provider_payment_id"`
	Amount            int64   `json:"amount"`
	Currency          string  `json:"currency"`
	EventID           string  `json:"event_id"`
	Dispute           Dispute `json:"dispute"`
}

// amends reports whether ev amends a payment rather than reporting a status of its own:
// a refund (partial or whole) or a dispute.
func amends(ev webhooks.Event) bool {
	return ev.Type == provider.EventChargeRefunded && ev.Charge != nil || ev.Dispute != nil
}

// amend builds the payment's state after a refund or dispute event, or nil when the event names
// no payment of ours. A refund or dispute of a payment not created through twice is recorded
// only: reconciliation reports the payment itself.
func (a *Applier) amend(ctx context.Context, ev webhooks.Event, now time.Time) (*Payment, error) {
	if (ev.PaymentIntent == nil || ev.PaymentIntent.ID == "") && ev.Dispute != nil && ev.Dispute.ChargeID != "" {
		// A dispute may name only the charge (its payment_intent null, as in Stripe's own
		// fixture): the charge's alias, written when we learned the charge, finds our payment.
		return a.amendByCharge(ctx, ev, now)
	}
	if ev.PaymentIntent == nil || ev.PaymentIntent.ID == "" {
		return nil, nil
	}
	pi := ev.PaymentIntent
	id := pi.Metadata[MetaPaymentID]
	if id == "" {
		var err error
		id, err = ByProviderID(ctx, a.Store, pi.ID)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	p, err := Get(ctx, a.Store, id)
	switch {
	case errors.Is(err, ErrNotFound):
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
	version := EventVersion(ev.ObjectVersion)
	switch {
	case ev.Charge != nil:
		decide, err := a.refundsDecide(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if !decide {
			p.Refund(ev.Charge.AmountRefunded, version, now) // no news keeps the version: Stale
		}
	case ev.Dispute != nil:
		d := Dispute{ID: capField(ev.Dispute.ID), Status: capField(ev.Dispute.Status), Reason: capField(ev.Dispute.Reason), Amount: ev.Dispute.Amount}
		if ev.Dispute.EvidenceDueBy > 0 && d.Status != provider.DisputeWon && d.Status != provider.DisputeLost {
			t := time.Unix(ev.Dispute.EvidenceDueBy, 0).UTC()
			d.EvidenceDueBy = &t
		}
		p.SetDispute(d, version, now)
	}
	return &p, nil
}

// amendByCharge is amend for a dispute that names only its charge.
func (a *Applier) amendByCharge(ctx context.Context, ev webhooks.Event, now time.Time) (*Payment, error) {
	id, err := ByProviderID(ctx, a.Store, ev.Dispute.ChargeID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // a charge we never made or never heard of: reconciliation reports its payment
	}
	if err != nil {
		return nil, err
	}
	p, err := Get(ctx, a.Store, id)
	if err != nil {
		return nil, err
	}
	if p.ProviderPaymentID == "" {
		return nil, nil // an alias names a payment that never reached the provider: nothing to dispute
	}
	ev.PaymentIntent = &webhooks.PaymentIntent{ID: p.ProviderPaymentID, Amount: ev.Dispute.Amount, Currency: ev.Dispute.Currency,
		Metadata: map[string]string{MetaPaymentID: p.ID}}
	return a.amend(ctx, ev, now)
}

// amendFollowOns is the follow-on work an amendment requires, for the same transaction: a
// dispute that waits for evidence opens one dead-letter record (its id names the dispute, so
// every later event of the same dispute writes the same message).
func amendFollowOns(ev webhooks.Event, p *Payment, now time.Time) ([]store.Write, error) {
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

// DisputeFollowOns returns the outbox handler that opens a dispute's dead-letter record
// (KindDisputeEvidence, which Apply commits with the dispute). Records.Open is idempotent on the
// dispute id, so a redelivered message is the same record.
func DisputeFollowOns(t deadletter.Opener) map[string]outbox.Handler {
	return map[string]outbox.Handler{KindDisputeEvidence: func(ctx context.Context, m outbox.Message) error {
		var de DisputeEvidence
		if err := json.Unmarshal(m.Payload, &de); err != nil {
			return fmt.Errorf("payments: dispute message %s: %w", m.ID, err)
		}
		due := "soon"
		if de.Dispute.EvidenceDueBy != nil {
			due = "by " + de.Dispute.EvidenceDueBy.UTC().Format(time.RFC1123)
		}
		expl := fmt.Sprintf("The customer disputed payment %s (%s %d %s, reason %q); the dispute %s is %s and the provider needs our evidence %s, or the money goes back to the customer.",
			de.PaymentID, de.ProviderPaymentID, de.Dispute.Amount, de.Currency, de.Dispute.Reason, de.Dispute.ID, de.Dispute.Status, due)
		_, _, err := t.Open(ctx, deadletter.Record{Source: deadletter.SourceWebhook, Key: "dispute#" + de.Dispute.ID,
			Cause: deadletter.CauseDisputeEvidenceDue, PaymentID: de.PaymentID, EventID: de.EventID, Payload: m.Payload,
			Facts:       deadletter.Facts{PaymentID: de.PaymentID, Provider: "stripe", Remote: de.Dispute.Status},
			Explanation: expl,
			SuggestedAction: "Gather the order's evidence (receipt, delivery proof, the customer's communication) and submit it in the provider's dashboard before the deadline, " +
				"or accept the dispute; then resolve this record with a note.",
			Tries: []deadletter.Try{{At: m.CreatedAt, Error: "dispute " + de.Dispute.Status}}})
		return err
	}}
}
