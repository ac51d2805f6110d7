// Package webhooks verifies and decodes inbound provider webhooks.
//
// Verification: one Verifier per provider, Verify(header, body) error, built by a validating
// constructor from every active secret (several during rotation) with an injected clock.
//
//   - stripe: Stripe-Signature "t=<unix>,v1=<hex>[,v1=...]". The MAC comparison is stripe-go's
//     (webhook.ValidatePayloadIgnoringTolerance, HMAC-SHA256, constant time, any v1 may match);
//     the timestamp window is ours, on the injected clock, in both directions (stripe-go reads
//     time.Now and checks only age). A header with two t entries is refused, because stripe-go
//     signs against the last one.
//   - standard: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature "v1,<base64>"
//     space-separated; whsec_<base64> secrets) through the reference Go library
//     (github.com/standard-webhooks/standard-webhooks/libraries/go). It takes one secret and a
//     package-level tolerance on time.Now, so StandardVerifier holds one library verifier per
//     secret, uses only its signature check, and checks the timestamp itself.
//
// The signature is checked before the timestamp, so ErrTooOld / ErrTooNew mean "authentic, out of
// window" (a replay or clock skew) and are worth a separate log line. Callers branch on the
// sentinels (ErrMissingHeader, ErrBadHeader, ErrNoValidSignature, ErrTooOld, ErrTooNew,
// ErrUnknownProvider); the HTTP layer answers all of them with one generic 400.
//
// Decoding: Decode turns a verified Delivery into an Event with the provider's event id (the first
// dedupe key, EventKey) and a place on one object's history (ObjectID, ObjectVersion; ChangeKey
// is the second dedupe key, for two Event objects describing one change).
//
// # Object versions for Stripe
//
// A PaymentIntent carries no version, so the version is derived:
//
//	ObjectVersion = created*16 + rank(event type)
//
// where created is the event's creation second on Stripe's clock and rank orders a PaymentIntent's
// lifecycle within one second, following Stripe's documented status order: created 1 <
// requires_action 2 < processing 3 < payment_failed = amount_capturable_updated 4 < succeeded =
// canceled 5 < charge.refunded 6 (other types 0). A failure may be followed by a retry
// that succeeds, never the reverse; succeeded and canceled exclude each other; a refund follows a
// success. charge.refunded is placed on its PaymentIntent (ObjectID = the pi_ id), so the
// ordering guard sees a refund as newer than the success it reverses.
//
// Limits, accepted knowingly: two changes of one payment within the same second whose ranks do not
// follow the lifecycle (a failure, then a new processing attempt, in one second) order wrongly, and
// two events with equal versions are treated as one change (the second is ignored). When in doubt
// the worker should fetch the PaymentIntent from the provider rather than trust the event's copy;
// reconciliation is the backstop either way.
//
// ChangeKey catches two Event objects for one change only when Stripe stamped both with the same
// created second; the ordering guard (equal or lower version is ignored) covers the rest.
//
// For Standard Webhooks, ObjectID is data.id when it is a string (else the event id) and
// ObjectVersion is data.version when the sender provides an integer, else the payload timestamp in
// milliseconds.
package webhooks
