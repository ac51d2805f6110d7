// Package declines classifies a declined card payment: what kind of decline it is, whether an
// automatic retry is allowed, who must act, and one plain sentence saying why.
//
// The rules transcribe shared/reference/declines.md and are applied in its order of precedence:
// Stripe's outcome.advice_code, then the Mastercard Merchant Advice Code, then Stripe's
// decline_code (table A), then the raw network response code (table B, Visa's categories).
// An unrecognised code is generic: a few retries days apart within the network caps, never a
// permanent stop and never "retry every few hours".
//
// The classes (Class, exposed by the payments API as "decline_class") are short and stable:
//
//	hard          the issuer will never approve this card: stop
//	cancellation  the customer revoked the authorization: treat as a cancellation
//	data          wrong or stale card details: retry only after an update
//	auth          the customer must authenticate on-session
//	limit         funds or a spending limit: retry when it has likely reset
//	technical     an issuer or processor fault: retry within minutes
//	generic       no usable reason: a few retries days apart, then ask
//	review        an operator must look (a duplicate payment)
//	config        an integration error
//
// Within a class, Action says how a retry is timed (retry_when_funded, retry_next_day,
// retry_after with DelaySeconds, ...); package recovery turns it into a time. HTTP-level
// outcomes (429, 5xx, timeouts) are not declines and are classified elsewhere (shared/retry).
package declines
