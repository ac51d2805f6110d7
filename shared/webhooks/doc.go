// Package webhooks is the vocabulary of inbound provider webhooks: the Delivery a verified
// request becomes, the Verifier contract and its sentinel errors, and decoding.
//
// Verification itself (the Stripe and Standard Webhooks verifiers, secret rotation) is package
// signature, beside this one, so that what only decodes deliveries (the webhook worker, the
// dead-letter sink, the outbox relay) links neither stripe-go nor the Standard Webhooks library.
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
// where created is the event's creation second on Stripe's clock and rank (provider.EventRank,
// the one order table) orders a PaymentIntent's lifecycle within one second, following Stripe's
// documented status order: created 1 < requires_action 2 < processing 3 < payment_failed =
// amount_capturable_updated 4 < succeeded = canceled 5 < charge.refunded 6 < the dispute
// events 7-9 (other types 0). A failure may be followed by a retry
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
