package worker

import "github.com/runtwice/twice/shared/webhooks"

// StripeEventTypes are the Stripe event types the worker applies: each reports a payment
// status (payments.StatusOfEvent), amends a payment (a refund, a dispute) or steers a running
// recovery (webhooks.Steer). Any other type is verified, deduplicated and recorded, and changes
// nothing. A Stripe webhook endpoint for twice enables exactly these; docs/deploy.md lists them
// and a test there fails when the two differ. TestStripeEventTypesAreApplied holds this list to
// the code.
var StripeEventTypes = []string{
	"payment_intent.requires_action",
	"payment_intent.amount_capturable_updated",
	"payment_intent.processing",
	"payment_intent.succeeded",
	"payment_intent.payment_failed",
	"payment_intent.canceled",
	"charge.refunded",
	"charge.refund.updated",
	"refund.created",
	"refund.updated",
	"refund.failed",
	"charge.dispute.created",
	"charge.dispute.updated",
	"charge.dispute.closed",
	webhooks.EventPaymentMethodAttached,
	webhooks.EventPaymentMethodAutomaticUpdated,
	webhooks.EventCustomerUpdated,
	webhooks.EventInvoicePaid,
}
