package payments

import (
	"time"

	"github.com/runtwice/twice/shared/provider"
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
// EvidenceDueBy, so the worker opens a dead-letter record for it.
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
