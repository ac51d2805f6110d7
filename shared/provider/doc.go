// Package provider is the payment-provider contract: the interfaces the payments API,
// recovery and reconciliation call, the Payment and Refund they get back in our own
// vocabulary, the typed errors they branch on, and the deterministic provider idempotency
// keys.
//
// The contract is four small interfaces, each implemented by the Stripe adapter
// (stripeprovider), the in-memory providertest.Fake and the retry wrapper (retry.Provider),
// and checked by one suite (providertest.Run):
//
//	Provider     create (and confirm), confirm, get, list, a payment method's card
//	Operations   capture, cancel, refund, list a payment's refunds
//	Searcher     the provider's key horizon and a search by our own id in the metadata
//	EventLister  the provider's event log, for backfills
//
// Statuses (Status) are the one vocabulary of payment statuses: where a payment is at the
// provider, and what the payments API stores and shows. Each Stripe state maps to exactly one;
// none maps to StatusPending, which the payments API keeps for one meaning: our own call's
// outcome is unknown and being resolved. Refund statuses (RefundStatus) are the same kind of
// set, with RefundReserved ours alone. StatusRequiresAction (the customer must
// authenticate: the Payment carries ClientSecret and NextAction) and StatusRequiresCapture
// (authorized, AmountCapturable held until CaptureBefore) are not final; Capture, Cancel, the
// customer, a webhook or the reconciler move them on. A partly refunded payment is
// StatusSucceeded with AmountRefunded > 0.
//
// The order of everything the provider reports is one table (lifecycle.go): the events on a
// payment's history with the status each reports and its rank within one second of the
// provider's clock, a dispute's statuses and a refund's. Event versions, our own writes'
// versions, reconciliation's "is the provider ahead", and the dispute and refund lifecycles
// all read it (EventRank, EventStatus, StatusEvent, StatusRank, DisputeRank, RefundRank).
//
// The client secret is a credential for the customer's browser. ClientSecret redacts itself
// in every printed, logged or marshalled form; only Reveal gives it out, for the answer to
// the customer's own request. The attempt log redacts it from stored bodies.
//
// Every write carries a provider idempotency key derived from business facts, never random
// and never a timestamp: IdempotencyKey (a create, from the caller's scope and key),
// AttemptKey (a recovery attempt), CaptureKey, CancelKey, RefundKey (from the caller's key of
// that request) and AutoCancelKey (a cancel our own timers decide, from our payment id and the
// reason). A write without one is refused (ErrMissingIdempotencyKey).
//
// Callers branch on outcomes with errors.As:
//
//	*DeclineError        the card was declined; final; classify with the decline tables
//	                     (an off-session payment that needs authentication is one:
//	                     authentication_required)
//	*UnknownOutcomeError maybe applied; repeat only with the same IdempotencyKey
//	*ThrottledError      429; RetryAfter says how long to wait
//	*TransientError      not applied; safe to repeat
//	*PermanentError      rejected for good (ErrNotFound, ErrIdempotencyMismatch,
//	                     ErrUnexpectedState, ErrRefundTooLarge via errors.Is)
//	*CredentialsError    401/403; alert an operator
//
// The retry policy (package retry) is the only place that decides which of these are repeated.
package provider
