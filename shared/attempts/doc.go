// Package attempts is the attempt log: every outbound provider call and every inbound webhook
// delivery (and, through API.Serve, every API request), stored so that "was this delivered?" is one
// lookup by idempotency key, payment id, event id, provider payment id or invoice. Every attempt
// is filed under the payment it concerns, the timed-out and reset ones included (a create that
// got no answer is filed by the payment id in its own request).
//
// An Attempt holds the request and the response (method, path, headers, bodies, status), when
// it started and how long it took, the lookup keys, a correlation id and a result ("ok",
// "declined", "timeout", "rejected_signature", ...).
//
// Nothing sensitive is stored. Log.Record redacts every attempt before it writes it, whoever
// built it (Attempt.Redacted), with the redaction engine (package redact): headers, bodies,
// the path, error text and every other field, the lookup keys included (a key that is a card
// number is shown masked).
//
// A lookup key is filed under a digest of its exact value, never its masked form, so two keys
// that mask alike ("1000000090042" and "1000000170042" both show as "[card ****0042]") never
// share a lookup; a caller's idempotency key is filed with its scope (LookupKey), so two
// callers' same key never meet either.
//
// A delivery that failed verification is quarantined: stored by the day it came, with its
// source and body hash, never under the ids it claims, which only count towards "an unverified
// delivery claimed this id" (Page.UnverifiedClaims).
//
// Redaction runs before the cap, so a cut never leaves half a secret; each body is then capped
// (8 KiB by default) on a UTF-8 boundary and marked truncated, with its original size kept.
//
// Each attempt is written whole once (under its id) and as a summary without headers and
// bodies once per lookup key it has, in one store.Store.PutAll (a batch, not a transaction: the
// items stand alone, and DynamoDB bills a batch half a transaction), with the store's TTL set to
// StartedAt plus the retention (30 days by default). Lookups return summaries, newest first, a
// page at a time; Get returns the whole attempt. An exchange answered from an idempotency
// record (a replay) is the exception: one summary under the caller's key and nothing else,
// since its answer and request are the key's first exchange's, stored whole.
//
// Recording must never fail a payment. Code that makes or receives provider calls depends on
// the one-method Recorder, or on a RecordFunc made by BestEffort, which logs a failure to
// record (without bodies) and carries on. Transport records outbound calls made through any
// http.Client (stripe-go's included) without holding back the response body; FromRequest
// builds the attempt for an inbound delivery. WithPaymentID, WithCorrelationID, WithEventID and
// WithOperation put the ids on the context the capture helpers read. StripeObserver and
// IngestObserver turn the Stripe adapter's calls and the webhook ingest's deliveries into
// attempts.
//
// API.Begin records an API request and its answer. The handler that writes the answer begins
// the exchange and, once it has answered, files it under the operation, scope and payment it
// names: the log is told, and calls nothing back. The provider calls made while serving the
// request are stored beside its own writes, and its answer waits for them.
//
//	w, r, file := api.Begin(w, r)
//	defer file("payments.create", scope, paymentID)
//	// ... serve r, writing the answer to w ...
package attempts
