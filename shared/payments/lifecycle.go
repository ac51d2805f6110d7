package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// The payment lifecycle in one place: how a provider status and a provider event name map to
// the payment's status (the statuses themselves are provider.Status*, the one vocabulary), the
// version rule that orders our writes against the provider's events, the metadata keys our
// creates carry, and the follow-on work a state requires (outbox kinds). The API, the
// resolver, the webhook worker and the recovery steps all go through it.

// OpenStatuses are the statuses a payment is not meant to stay in: each has a bound
// (StuckAfter).
var OpenStatuses = []string{provider.StatusPending, provider.StatusRequiresAction, provider.StatusRequiresCapture, provider.StatusProcessing}

// Defaults of Bounds.
const (
	// DefaultCustomerWindow is how long a payment may wait for the customer's action: under
	// a day, so that a customer who walked away is released the same day of their week.
	DefaultCustomerWindow = 23 * time.Hour
	// DefaultCaptureWindow is how long an authorization may wait for its capture before an
	// operator is asked to act: a day before the 7 days most card authorizations last.
	DefaultCaptureWindow = 6 * 24 * time.Hour
)

// Bounds are how long a payment may stay in each non-final status; the zero value takes the
// defaults. Reconciliation reads them (recon.Reconciler.Bounds) and the reconciler function
// sets CustomerWindow from its configuration.
type Bounds struct {
	// CustomerWindow bounds requires_action (default DefaultCustomerWindow): past it the
	// payment is canceled at the provider (AutoCancelMessage).
	CustomerWindow time.Duration
	// CaptureWindow bounds requires_capture (default DefaultCaptureWindow): past it the
	// payment is reported for an operator to capture or cancel before the hold lapses.
	CaptureWindow time.Duration
}

// StuckAfter is how long a payment may stay in a non-final status before it is stuck: a
// pending payment past the provider's idempotency key horizon (its outcome can no longer be
// settled by repeating the call), a processing one past a day, one waiting for the customer
// past the customer window, an authorization past the capture window. 0: the status has no
// bound (a final one). Reconciliation reports a payment still there past its bound.
func (b Bounds) StuckAfter(status string) time.Duration {
	switch status {
	case provider.StatusPending:
		return provider.StripeKeyHorizon
	case provider.StatusProcessing:
		return 24 * time.Hour
	case provider.StatusRequiresAction:
		return orDefault(b.CustomerWindow, DefaultCustomerWindow)
	case provider.StatusRequiresCapture:
		return orDefault(b.CaptureWindow, DefaultCaptureWindow)
	}
	return 0
}

// StuckAfter is Bounds{}.StuckAfter: the default bounds.
func StuckAfter(status string) time.Duration { return Bounds{}.StuckAfter(status) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Metadata keys every create of ours puts on the provider's payment. MetaPaymentID is how a
// payment whose outcome was unknown is found at the provider once its idempotency key may be
// forgotten (provider.Searcher).
const (
	MetaPaymentID = "twice_payment_id"
	MetaScope     = "twice_scope"
	MetaInvoice   = "twice_invoice"
)

// Outbox kinds: the follow-on work a payment state requires, committed with the state.
const (
	// KindResolve queues the next resolution of a pending payment (payload ResolveJob).
	KindResolve = "resolve"
	// KindStartRecovery starts recovery of a declined payment (payload RecoveryStart).
	KindStartRecovery = "start_recovery"
)

// statusOf is the payment's status for a provider payment in status s: s itself (one
// vocabulary), except that no provider status is pending and one this code does not know reads
// as processing (not final: look again).
func statusOf(s provider.Status) string {
	switch s {
	case provider.StatusRequiresAction, provider.StatusRequiresCapture, provider.StatusSucceeded, provider.StatusDeclined,
		provider.StatusRefunded, provider.StatusCanceled:
		return string(s)
	}
	return provider.StatusProcessing
}

// VersionAt is the version of a payment state our own code observed at t: seconds first, then
// the rank of the event that reports the state (provider.StatusEvent; the scheme an event's
// version follows, webhooks.StripeVersion, so the two order against each other), then one more
// step, so that our write of a state beats the provider's event for the same state in the same
// second: ours carries the request's details (payment method, invoice, key) that an event lacks.
func VersionAt(t time.Time, status string) int64 {
	return webhooks.StripeVersion(t.Unix(), provider.StatusEvent(provider.Status(status)))*2 + 1
}

// EventVersion is the version of a payment state a provider event reports, from the event's
// object version (webhooks.Event.ObjectVersion).
func EventVersion(objectVersion int64) int64 { return objectVersion * 2 }

// RecoveryStart is the payload of a KindStartRecovery message.
type RecoveryStart struct {
	PaymentID string `json:"payment_id"`
	Round     int    `json:"round"`
}

// RecoveryMessage is the outbox write that starts the first recovery round of a declined
// payment. Its id is the same from every writer (the API, the resolver, the webhook worker), so
// the decline seen twice is one message, and the execution name makes a second delivery
// harmless.
func RecoveryMessage(paymentID string, now time.Time) (store.Write, error) {
	return outbox.New(KindStartRecovery, "recovery#"+paymentID+"#r1", RecoveryStart{PaymentID: paymentID, Round: 1}, now)
}

// FollowOns returns the outbox handlers of the payment lifecycle: queue a resolve job, queue
// an auto-cancel, start a recovery (reading the payment as stored).
func (s *Service) FollowOns() map[string]outbox.Handler {
	return map[string]outbox.Handler{
		KindResolve: func(ctx context.Context, m outbox.Message) error {
			var job ResolveJob
			if err := json.Unmarshal(m.Payload, &job); err != nil {
				return fmt.Errorf("payments: resolve message %s: %w", m.ID, err)
			}
			if s.Resolver == nil {
				return fmt.Errorf("payments: no resolver for %s", m.ID)
			}
			return s.Resolver.EnqueueResolve(ctx, job)
		},
		// An auto-cancel goes to the resolve queue: the payment resolver holds the provider.
		KindAutoCancel: func(ctx context.Context, m outbox.Message) error {
			var job ResolveJob
			if err := json.Unmarshal(m.Payload, &job); err != nil || job.Cancel == "" {
				return fmt.Errorf("payments: auto-cancel message %s: not an auto-cancel (%v)", m.ID, err)
			}
			if s.Resolver == nil {
				return fmt.Errorf("payments: no resolve queue for %s", m.ID)
			}
			return s.Resolver.EnqueueResolve(ctx, job)
		},
		KindStartRecovery: func(ctx context.Context, m outbox.Message) error {
			var rs RecoveryStart
			if err := json.Unmarshal(m.Payload, &rs); err != nil {
				return fmt.Errorf("payments: recovery message %s: %w", m.ID, err)
			}
			if s.OnDecline == nil {
				return fmt.Errorf("payments: no recovery starter for %s", m.ID)
			}
			p, err := Get(ctx, s.Store, rs.PaymentID)
			if err != nil {
				return err
			}
			return s.OnDecline.Declined(ctx, p)
		},
	}
}

// Transition moves p to a state the provider reported: status, the decline that came with it
// (classified by classify, when given), the version that orders it against every other writer's
// view (VersionAt for our own observations, EventVersion for an event's), at time at. It is the
// one state change the API, the resolver, the webhook worker and the recovery steps make. A
// decline without a card brand keeps the brand an earlier write knew, so network caps still
// apply; a success clears the decline.
//
// A success ends a PaymentIntent: it never processes or declines again. So a success over a
// payment p still holds as pending, processing or declined is news whatever the clocks of the
// two writers said (a decline recorded by a writer whose clock ran ahead of the provider's): its
// version is then raised just above p's, as a refund's is (Refund). A payment the provider
// charged is never left declined by a clock. For the same reason nothing but a refund moves a
// charged payment on (undoesCharge): a report of any other status is older than the charge,
// whatever its version, and leaves p as it is.
//
// What belongs to a waiting status goes when the payment leaves it: the next action with
// requires_action, the hold (amount capturable, capture before) with requires_capture.
func (p *Payment) Transition(status string, d *provider.Decline, classify func(provider.Decline) string, version int64, at time.Time) {
	if undoesCharge(p.Status, status) {
		return // older than the charge: p keeps its state and version, so a write of it loses
	}
	if status == provider.StatusSucceeded && version <= p.Version && beforeSuccess(p.Status) {
		version = p.Version + 1
	}
	p.Status, p.Version, p.UpdatedAt = status, version, at.UTC()
	if status != provider.StatusRequiresAction {
		p.NextAction = nil
	}
	if status != provider.StatusRequiresCapture {
		p.AmountCapturable, p.CaptureBefore = 0, time.Time{}
	}
	switch {
	case status == provider.StatusDeclined && d != nil:
		nd := *d
		if nd.Network == "" && p.Decline != nil {
			nd.Network = p.Decline.Network
		}
		p.Decline = &nd
		if classify != nil {
			p.DeclineClass = classify(nd)
		}
	case status == provider.StatusSucceeded:
		p.Decline, p.DeclineClass = nil, ""
	}
}

// charged reports whether a payment in status holds the provider's charge: succeeded, or
// refunded after it (a refund that fails later makes it succeeded again).
func charged(status string) bool {
	return status == provider.StatusSucceeded || status == provider.StatusRefunded
}

// undoesCharge reports whether status, over a payment in status from, would take back a charge
// the provider made. A PaymentIntent that succeeded never processes, declines, waits or cancels
// again, so such a report describes the payment before its charge: the answer to a create sent
// before a recovery charged the payment, or the provider's replay of that answer, arriving
// after the charge was recorded, with a version from the later moment it arrived.
func undoesCharge(from, to string) bool { return charged(from) && !charged(to) }

// beforeSuccess reports whether a payment in status may still succeed at the provider:
// pending, processing, declined (a declined PaymentIntent can be confirmed again), waiting for
// the customer or for a capture.
func beforeSuccess(status string) bool {
	switch status {
	case provider.StatusPending, provider.StatusProcessing, provider.StatusDeclined, provider.StatusRequiresAction, provider.StatusRequiresCapture:
		return true
	}
	return false
}

// Observe moves p to the state of the provider's payment pp as our own call saw it at at:
// Transition with the status statusOf maps, at VersionAt, and what that state carries (the
// customer's next action, the hold of an authorization, what a capture took, why it was
// canceled). The create, capture and cancel answers and the auto-cancel all go through it.
func (p *Payment) Observe(pp provider.Payment, classify func(provider.Decline) string, at time.Time) {
	if pp.ID != "" {
		p.ProviderPaymentID = pp.ID
	}
	if pp.LatestCharge != "" {
		p.LatestCharge = pp.LatestCharge
	}
	p.SetCard(pp.Card)
	st := statusOf(pp.Status)
	p.Transition(st, pp.Decline, classify, VersionAt(at, st), at)
	switch st {
	case provider.StatusRequiresAction:
		if pp.NextAction != nil {
			p.NextAction = &NextAction{Type: pp.NextAction.Type, RedirectURL: pp.NextAction.RedirectURL}
		}
	case provider.StatusRequiresCapture:
		p.AmountCapturable, p.CaptureBefore = pp.AmountCapturable, pp.CaptureBefore.UTC()
		if pp.CaptureBefore.IsZero() {
			p.CaptureBefore = time.Time{}
		}
	case provider.StatusSucceeded:
		if p.CaptureMethod == CaptureManual && pp.AmountReceived > 0 && pp.AmountReceived < p.Amount {
			p.AmountReceived = pp.AmountReceived
		}
	case provider.StatusCanceled:
		if pp.CancellationReason != "" {
			p.CancellationReason = pp.CancellationReason
		}
	}
}
