package provider

import (
	"context"
	"iter"
	"time"
)

// EventLister lists the provider's event log (Stripe's GET /v1/events): the ground truth a
// backfill replays when webhooks were lost.
type EventLister interface {
	// Events yields the events matching q, newest first as the provider lists them (oldest
	// first with q.After), fetching pages as the caller ranges; a failure is yielded once and
	// ends the sequence.
	Events(ctx context.Context, q EventQuery) iter.Seq2[Event, error]
}

// EventQuery selects events by creation time (inclusive bounds; zero: open) and delivery.
type EventQuery struct {
	CreatedFrom time.Time
	CreatedTo   time.Time
	// Undelivered keeps only events not (yet) delivered to every endpoint
	// (delivery_success=false).
	Undelivered bool
	// Types filters by event type (at most 20; a trailing * matches a prefix).
	Types []string
	// After lists the events that come after this one in the log, oldest first (Stripe's
	// ending_before, each page reversed): a walk that resumes at a cursor. Before continues
	// the newest-first listing below this event (starting_after). At most one is set.
	After, Before string
}

// Event types: the Stripe events twice applies, orders or sends from its simulator, each named
// once. Tests may spell them out where they are fixtures of the wire.
const (
	// A PaymentIntent's lifecycle (ranked by the order table: EventRank).
	EventPaymentIntentCreated           = "payment_intent.created"
	EventPaymentIntentRequiresAction    = "payment_intent.requires_action"
	EventPaymentIntentPartiallyFunded   = "payment_intent.partially_funded"
	EventPaymentIntentProcessing        = "payment_intent.processing"
	EventPaymentIntentCapturableUpdated = "payment_intent.amount_capturable_updated"
	EventPaymentIntentPaymentFailed     = "payment_intent.payment_failed"
	EventPaymentIntentSucceeded         = "payment_intent.succeeded"
	EventPaymentIntentCanceled          = "payment_intent.canceled"
	// A charge: captured, refunded (the cumulative amount refunded), disputed.
	EventChargeCaptured = "charge.captured"
	EventChargeRefunded = "charge.refunded"
	EventDisputeCreated = "charge.dispute.created"
	EventDisputeUpdated = "charge.dispute.updated"
	EventDisputeClosed  = "charge.dispute.closed"
	// A refund object's lifecycle.
	EventRefundCreated       = "refund.created"
	EventRefundUpdated       = "refund.updated"
	EventRefundFailed        = "refund.failed"
	EventChargeRefundUpdated = "charge.refund.updated"
	// Customer-side events, which steer running recoveries.
	EventPaymentMethodAttached         = "payment_method.attached"
	EventPaymentMethodAutomaticUpdated = "payment_method.automatically_updated"
	EventCustomerUpdated               = "customer.updated"
	EventInvoicePaid                   = "invoice.paid"
)

// Event is one event of the provider's log: its id, type, time and the body a webhook
// delivery of it carries.
type Event struct {
	ID      string
	Type    string
	Created time.Time
	Body    []byte
}
