package problem

import "net/http"

// TypeBase is where every problem type twice answers with is documented: the README's
// "Problems" table has one anchor per type ("#problem-invalid-request").
const TypeBase = "https://github.com/runtwice/twice/blob/main/README.md#problem-"

// The problem codes: the last segment of a problem's type URI. Each has one status and one
// meaning on every surface that answers with it (statuses); a client branches on the type,
// never on the detail, which is prose for people.
const (
	MalformedRequest     = "malformed-request"
	InvalidRequest       = "invalid-request"
	BodyTooLarge         = "body-too-large"
	KeyMissing           = "idempotency-key-missing"
	KeyInvalid           = "idempotency-key-invalid"
	KeyInProgress        = "idempotency-key-in-progress"
	KeyReused            = "idempotency-key-reused"
	NotFound             = "not-found"
	ProviderBusy         = "provider-busy"
	ProviderUnreachable  = "provider-unreachable"
	ProviderRejected     = "provider-rejected"
	Internal             = "internal"
	PaymentState         = "payment-state"
	WebhookUnverified    = "webhook-unverified"
	Unavailable          = "unavailable"
	Unauthorized         = "unauthorized"
	RecordClosed         = "record-closed"
	NothingToRetry       = "nothing-to-retry"
	RecordChanged        = "record-changed"
	ReconcileFailed      = "reconciliation-failed"
	NoRunningRecovery    = "no-running-recovery"
	TooManyAttempts      = "too-many-attempts"
	PaymentNotRefundable = "payment-not-refundable"
	RefundTooLarge       = "refund-exceeds-remaining"
)

// statuses is the one table of problem codes to HTTP status, for every surface: a handler names
// the code, never the status. Each line says when the code answers and the extension members
// it carries.
var statuses = map[string]int{
	MalformedRequest:     http.StatusBadRequest, // the body is not JSON of the expected shape
	InvalidRequest:       http.StatusBadRequest, // fields out of range; fields, reasons
	BodyTooLarge:         http.StatusRequestEntityTooLarge,
	KeyMissing:           http.StatusBadRequest,
	KeyInvalid:           http.StatusBadRequest,
	KeyInProgress:        http.StatusConflict,            // Retry-After
	KeyReused:            http.StatusUnprocessableEntity, // another body under the key; fields
	NotFound:             http.StatusNotFound,
	ProviderBusy:         http.StatusServiceUnavailable, // Retry-After
	ProviderUnreachable:  http.StatusBadGateway,
	ProviderRejected:     http.StatusUnprocessableEntity, // the provider refused the request; provider_code
	Internal:             http.StatusInternalServerError, // a fault of ours; safe to retry with the same key
	PaymentState:         http.StatusConflict,            // the payment's state does not allow the capture or cancel; payment_status
	WebhookUnverified:    http.StatusBadRequest,          // signature, timestamp or body refused
	Unavailable:          http.StatusServiceUnavailable,  // Retry-After: try again later
	Unauthorized:         http.StatusUnauthorized,
	RecordClosed:         http.StatusConflict,            // the dead-letter record is closed
	NothingToRetry:       http.StatusConflict,            // the record has no retry (resolve or override it)
	RecordChanged:        http.StatusConflict,            // changed while the operator acted; reload
	ReconcileFailed:      http.StatusBadGateway,          // the run could not finish; run it again
	NoRunningRecovery:    http.StatusConflict,            // nothing to steer
	TooManyAttempts:      http.StatusTooManyRequests,     // Retry-After: failed credentials from this source
	PaymentNotRefundable: http.StatusConflict,            // the payment has not succeeded; payment_status
	RefundTooLarge:       http.StatusUnprocessableEntity, // more than remains refundable; remaining, currency, amount_refunded
}

// New returns the problem of code (a constant above) with the code's status and that status's
// standard title. A code missing from the table is a fault of ours: 500.
func New(code, detail string) Problem {
	status, ok := statuses[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	return Problem{Type: TypeBase + code, Title: http.StatusText(status), Status: status, Detail: detail}
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
