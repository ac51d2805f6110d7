// Package header knows which HTTP headers carry a credential or a signature, and masks them.
// It is the part of the redaction engine (package redact) that code which only passes headers
// on needs: the webhook ingest masks a delivery's headers before its Observer sees them.
//
// It is apart from redact because redact tokenises JSON bodies with go-json-experiment, and the
// ingest is linked by functions that must not link that module (outbox-relay, through the
// backfill's queue sink): infra/rie's TestLambdaBinariesLinkOnlyTheModulesTheirJobNeeds holds
// it.
//
//	seen := header.Mask(r.Header) // Stripe-Signature, Authorization, ...: "[redacted]"
package header
