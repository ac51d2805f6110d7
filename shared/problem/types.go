package problem

import "net/http"

// TypeBase is where every problem type twice answers with is documented: the README's
// "Problems" table has one anchor per type ("#problem-invalid-request").
const TypeBase = "https://github.com/runtwice/twice/blob/main/README.md#problem-"

// The problem types. Each has one status and one meaning on every surface that answers with it;
// a client branches on the type, never on the detail, which is prose for people.
const (
	MalformedRequest    = "malformed-request"           // 400: the body is not JSON of the expected shape
	InvalidRequest      = "invalid-request"             // 400: fields out of range; fields, reasons
	BodyTooLarge        = "body-too-large"              // 413
	KeyMissing          = "idempotency-key-missing"     // 400
	KeyInvalid          = "idempotency-key-invalid"     // 400
	KeyInProgress       = "idempotency-key-in-progress" // 409 with Retry-After
	KeyReused           = "idempotency-key-reused"      // 422: another body under the key; fields
	NotFound            = "not-found"                   // 404
	ProviderBusy        = "provider-busy"               // 503 with Retry-After
	ProviderUnreachable = "provider-unreachable"        // 502
	ProviderRejected    = "provider-rejected"           // 422: the provider refused the request; provider_code
	Internal            = "internal"                    // 500: safe to retry with the same key
	PaymentState        = "payment-state"               // 409: the payment's state does not allow the capture or cancel; payment_status
	WebhookUnverified   = "webhook-unverified"          // 400: signature, timestamp or body refused
	Unavailable         = "unavailable"                 // 503 with Retry-After: try again later
	Unauthorized        = "unauthorized"                // 401
	RecordClosed        = "record-closed"               // 409: the dead-letter record is closed
	NothingToRetry      = "nothing-to-retry"            // 409: the record has no retry (resolve or override it)
	RecordChanged       = "record-changed"              // 409: changed while the operator acted; reload
	RetryNotSent        = "retry-not-sent"              // 502: the retry could not be sent; nothing changed
	ReconcileFailed     = "reconciliation-failed"       // 502: the run could not finish; run it again
	NoRunningRecovery   = "no-running-recovery"         // 409: nothing to steer
	TooManyAttempts     = "too-many-attempts"           // 429 with Retry-After: failed credentials from this source
	// Refunds: the payment cannot be refunded now, or not by that much.
	PaymentNotRefundable = "payment-not-refundable"   // 409: the payment has not succeeded; payment_status
	RefundTooLarge       = "refund-exceeds-remaining" // 422: more than remains refundable; remaining, currency, amount_refunded
)

// Typed returns the problem of the given type (a constant above) with the standard title for
// status.
func Typed(status int, typ, detail string) Problem {
	return Problem{Type: TypeBase + typ, Title: http.StatusText(status), Status: status, Detail: detail}
}

// WithFields adds the one field-list member every problem about fields carries: "fields", the
// names, sorted.
func (p Problem) WithFields(names []string) Problem {
	if p.Extra == nil {
		p.Extra = map[string]any{}
	}
	if names == nil {
		names = []string{}
	}
	p.Extra["fields"] = names
	return p
}
