package provider

// The order of what the provider reports, in one table (lifecycle). A report about an object
// names one of its states; a state of higher rank comes later in the object's life, so a
// report of it is news over one of lower rank, never the reverse. Every rule that orders the
// provider's reports reads this table:
//   - the version of an event (webhooks.StripeVersion: created second, then EventRank) and of
//     our own observation of a payment (payments.VersionAt), so the two order against each other;
//   - the status an event reports and the event that reports a status (EventStatus,
//     StatusEvent): applying an event, and settling a payment as the event that reports its state;
//   - whether the provider is ahead of our record of a payment (StatusRank, in reconciliation);
//   - how far a dispute (DisputeRank) and a refund (RefundRank) have come: neither goes back.

// Dispute statuses, Stripe's: an inquiry (warning_*) before a chargeback, a response needed
// before one under review, then the outcome.
const (
	DisputeWarningNeedsResponse = "warning_needs_response"
	DisputeWarningUnderReview   = "warning_under_review"
	DisputeWarningClosed        = "warning_closed"
	DisputeNeedsResponse        = "needs_response"
	DisputeUnderReview          = "under_review"
	DisputeWon                  = "won"
	DisputeLost                 = "lost"
	DisputePrevented            = "prevented"
)

// object names whose life a row of the table orders.
type object int

const (
	payment object = iota // a PaymentIntent, by the events on its history
	dispute               // a dispute of its charge, by status
	refund                // one refund, by status
)

// lifecycle is the one order table.
//
// A payment's rows are the events on its PaymentIntent's history, each with the status it
// reports (none: ""), ranked within one second of Stripe's clock: an event's created has
// one-second resolution, so two changes in one second need a tie-break. The order is Stripe's
// documented lifecycle (requires_action, processing, requires_capture, then a final state): a
// failure may be followed by a retry that succeeds, a success is never followed by a failure,
// succeeded and canceled exclude each other, a refund follows a success, and a dispute follows
// the charge. Event types outside the table rank 0.
//
// A dispute never moves back along its statuses, and neither does a refund: Stripe's refunds
// carry no version of their own, so a refund's status is its version (a succeeded refund may
// fail later; a failed one never succeeds).
var lifecycle = []struct {
	object object
	event  string // a payment's row: the event type
	status string
	rank   int64
}{
	{payment, EventPaymentIntentCreated, StatusPending, 1}, // ours: the create, before its outcome is known
	{payment, EventPaymentIntentRequiresAction, StatusRequiresAction, 2},
	{payment, EventPaymentIntentPartiallyFunded, "", 2},
	{payment, EventPaymentIntentProcessing, StatusProcessing, 3},
	{payment, EventPaymentIntentCapturableUpdated, StatusRequiresCapture, 4},
	{payment, EventPaymentIntentPaymentFailed, StatusDeclined, 4},
	{payment, EventPaymentIntentSucceeded, StatusSucceeded, 5},
	{payment, EventPaymentIntentCanceled, StatusCanceled, 5},
	{payment, EventChargeRefunded, StatusRefunded, 6},
	{payment, EventDisputeCreated, "", 7},
	{payment, EventDisputeUpdated, "", 8},
	{payment, EventDisputeClosed, "", 9},

	{dispute, "", DisputeWarningNeedsResponse, 1},
	{dispute, "", DisputeWarningUnderReview, 2},
	{dispute, "", DisputeWarningClosed, 3},
	{dispute, "", DisputeNeedsResponse, 4},
	{dispute, "", DisputeUnderReview, 5},
	{dispute, "", DisputeWon, 6},
	{dispute, "", DisputeLost, 6},
	{dispute, "", DisputePrevented, 6},

	{refund, "", RefundReserved, 0},
	{refund, "", RefundPending, 1},
	{refund, "", RefundSucceeded, 2},
	{refund, "", RefundFailed, 3},
	{refund, "", RefundCanceled, 3},
}

// The table's lookups.
var (
	eventRank   = map[string]int64{}
	eventStatus = map[string]Status{}
	statusEvent = map[Status]string{}
	disputeRank = map[string]int64{}
	refundRank  = map[string]int64{}
)

func init() {
	for _, r := range lifecycle {
		switch r.object {
		case payment:
			eventRank[r.event] = r.rank
			if r.status != "" {
				statusEvent[Status(r.status)] = r.event
			}
			if r.status != "" && r.status != StatusPending {
				eventStatus[r.event] = Status(r.status)
			}
		case dispute:
			disputeRank[r.status] = r.rank
		case refund:
			refundRank[r.status] = r.rank
		}
	}
}

// EventRank is an event's place on its payment's history within one second of the provider's
// clock; 0 for an event type outside the table.
func EventRank(eventType string) int64 { return eventRank[eventType] }

// EventStatus is the status an event reports (payment_intent.succeeded: succeeded), and false
// for an event that reports none. No event reports StatusPending: it is ours alone
// (payment_intent.created ranks our own pending writes).
func EventStatus(eventType string) (Status, bool) {
	s, ok := eventStatus[eventType]
	return s, ok
}

// StatusEvent is the event that reports status s (for StatusPending, payment_intent.created),
// or "" for a status outside the table.
func StatusEvent(s Status) string { return statusEvent[s] }

// StatusRank is a payment status's place along the lifecycle: the rank of the event that
// reports it.
func StatusRank(s Status) int64 { return eventRank[statusEvent[s]] }

// DisputeRank is a dispute status's place along a dispute's lifecycle; 0 for one outside the
// table.
func DisputeRank(status string) int64 { return disputeRank[status] }

// RefundRank is a refund status's place along a refund's lifecycle, and false for a status
// outside the table.
func RefundRank(status string) (int64, bool) {
	r, ok := refundRank[status]
	return r, ok
}
