// Package ingest is the fast webhook endpoint, POST /webhooks/{provider}: cap the body, verify
// with the provider's webhooks.Verifier, hand a webhooks.Delivery to a Queue, answer 200. Nothing
// slow happens inline; the worker decodes, dedupes and applies.
//
// Statuses: 200 {"received":true} once the queue accepted; 400 for any verification failure (one
// generic problem+json detail for all causes; the real reason goes to the log and the Observer);
// 404 for an unknown provider; 413 over MaxBody; 503 with Retry-After when the queue refuses or
// the secrets cannot be loaded, so the provider retries and nothing verified is lost.
//
// The Observer sees every delivery with its real reason and with signature and credential
// headers masked by the redaction engine (redact/header.Mask); neither logs nor Observer ever
// see a secret or a signature.
package ingest
