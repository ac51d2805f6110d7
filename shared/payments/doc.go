// Package payments is POST /payments and GET /payments/{id}: idempotent payment creation on
// package idempotency, and the payment lifecycle (lifecycle.go: the event-to-status table, the
// version rule, the metadata keys, Transition and Observe, the bounds of the waiting statuses,
// the outbox kinds). POST /payments/{id}/capture and /cancel
// (operations.go) run under an Idempotency-Key of their own, with the same semantics.
//
// A payment that needs its customer (requires_action) is answered 201 with client_secret and
// next_action; the secret lives in that stored answer only, so its replay is the same bytes
// and GET, the event feed and the logs never carry it. The stored answer is the answer to the
// request, not the payment's state: the payment moves on by the provider's events and by
// reconciliation, and GET shows where it is.
//
// A request runs under its Idempotency-Key: a success (201) or a decline (402) is stored with the
// payment in one transaction and replayed byte for byte. An unknown outcome (a provider timeout
// after the request was sent) answers 202 and keeps the key pending with the caller's request
// bytes; a repeat resumes it, and a resolve job (queued through the outbox) does too, until the
// outcome is known. Re-sending a create under the same provider key is allowed only within half
// the provider's key horizon (provider.Searcher: Stripe 24 h); later the payment is found at the
// provider by its twice_payment_id metadata and adopted, or, when nothing is found near or past the
// horizon, settled as canceled without ever creating again. Follow-on work (resolve jobs, recovery
// starts) is never called after a commit: it is an outbox message in the same transaction, and
// FollowOns are the handlers a relay delivers them to.
//
// Applying what the provider says has one home, Applier (apply.go): a webhook event (the
// webhook worker decodes deliveries and hands them over), an event of the provider's log (the
// backfill) and the provider's current view of a payment or refund (reconciliation's healing,
// Settle and SettleRefund) take the same path: dedupe on the event id and on the change, the
// ordering guard (versions from provider's one order table), and the payment's new state with
// its change, aliases and follow-on work (a recovery start, a dispute's dead-letter message, a
// replan, steering) in one transaction.
//
//	a := &payments.Applier{Store: st, Classify: declines.ClassOf,
//		Steer: recovery.SteerMessages, Replan: recovery.ReplanMessages}
//	outcome, err := a.Apply(ctx, ev) // Applied, Duplicate, Stale or Recorded
package payments
