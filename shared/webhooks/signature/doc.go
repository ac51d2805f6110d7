// Package signature verifies that inbound webhooks were signed by their provider: one
// webhooks.Verifier per provider, Verify(header, body) error, built by a validating constructor
// from every active secret (several during rotation) with an injected clock; Rotating follows
// the secrets of a SecretSource. Only webhook-ingest (and the local stack) link it.
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
// ErrUnknownProvider, in package webhooks); the HTTP layer answers all of them with one generic
// 400.
//
//	v, err := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: secrets, Now: clock.Now})
//	err = v.Verify(r.Header, body) // nil, or wraps webhooks.ErrNoValidSignature, ErrTooOld, ...
package signature
