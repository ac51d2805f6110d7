package worker

import "github.com/runtwice/twice/shared/provider"

// StripeEventTypes are the Stripe event types the worker applies: each reports a payment
// status (payments.StatusOfEvent), amends a payment (a refund, a dispute) or steers a running
// recovery (webhooks.Steer). Any other type is verified, deduplicated and recorded, and changes
// nothing. A Stripe webhook endpoint for twice enables exactly these; docs/deploy.md lists them
// and a test there fails when the two differ. TestStripeEventTypesAreApplied holds this list to
// the code.
var StripeEventTypes = []string{
	provider.EventPaymentIntentRequiresAction,
	provider.EventPaymentIntentCapturableUpdated,
	provider.EventPaymentIntentProcessing,
	provider.EventPaymentIntentSucceeded,
	provider.EventPaymentIntentPaymentFailed,
	provider.EventPaymentIntentCanceled,
	provider.EventChargeRefunded,
	provider.EventChargeRefundUpdated,
	provider.EventRefundCreated,
	provider.EventRefundUpdated,
	provider.EventRefundFailed,
	provider.EventDisputeCreated,
	provider.EventDisputeUpdated,
	provider.EventDisputeClosed,
	provider.EventPaymentMethodAttached,
	provider.EventPaymentMethodAutomaticUpdated,
	provider.EventCustomerUpdated,
	provider.EventInvoicePaid,
}
