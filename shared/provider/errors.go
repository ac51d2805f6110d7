package provider

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinels a caller can test with errors.Is on the typed errors below.
var (
	// ErrNotFound: the provider has no such payment (a *PermanentError with status 404).
	ErrNotFound = errors.New("provider: not found")
	// ErrIdempotencyMismatch: the idempotency key was used before with different parameters
	// (a *PermanentError, Stripe's idempotency_error). It is a bug of ours, never retried.
	ErrIdempotencyMismatch = errors.New("provider: idempotency key reused with different parameters")
	// ErrMissingIdempotencyKey: a write (create, confirm, capture, cancel, refund) was asked
	// for without a provider key.
	ErrMissingIdempotencyKey = errors.New("provider: missing idempotency key")
	// ErrUnexpectedState: the payment's state does not allow the call (a *PermanentError with
	// Stripe's payment_intent_unexpected_state, or charge_not_refundable for a refund of a
	// payment that has no captured charge): capture of what is not requires_capture, cancel of
	// a succeeded or canceled payment. Read the payment again; never retry as is.
	ErrUnexpectedState = errors.New("provider: the payment's state does not allow this")
	// ErrRefundTooLarge: a refund asked for more than remains refundable (a *PermanentError
	// with Stripe's amount_too_large or charge_already_refunded on a refund).
	ErrRefundTooLarge = errors.New("provider: refund larger than what remains")
	// ErrNotCard: PaymentMethodCard was asked about a payment method that is no card, or
	// whose card the provider gives no fingerprint for; no card network cap applies to it.
	ErrNotCard = errors.New("provider: the payment method is not a card with a fingerprint")
)

// DeclineError is a card decline: the payment exists at the provider and is declined. It is a
// final outcome, never retried by the outbound policy; recovery decides what happens next.
type DeclineError struct {
	Payment Payment
}

func (e *DeclineError) Error() string {
	code := ""
	if e.Payment.Decline != nil {
		code = e.Payment.Decline.Code
	}
	return fmt.Sprintf("provider: payment %s declined: %s", e.Payment.ID, code)
}

// UnknownOutcomeError means the request may or may not have been applied: a timeout, a
// connection reset or EOF after the request was sent, a 5xx after the provider may have acted,
// or a 409 for a key still in flight. The only safe repeat is with the same idempotency key.
type UnknownOutcomeError struct {
	Op             string // create, confirm, capture, cancel, refund, get, list, refunds
	IdempotencyKey string // the key to repeat with; empty for reads
	StatusCode     int    // 0 when no response arrived
	Err            error
}

func (e *UnknownOutcomeError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("provider: %s: unknown outcome (status %d): %v", e.Op, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("provider: %s: unknown outcome: %v", e.Op, e.Err)
}

func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// ThrottledError is a 429. RetryAfter is the provider's Retry-After, zero when it sent none.
type ThrottledError struct {
	Op         string
	RetryAfter time.Duration
	Err        error
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("provider: %s: throttled (retry after %s): %v", e.Op, e.RetryAfter, e.Err)
}

func (e *ThrottledError) Unwrap() error { return e.Err }

// TransientError failed in a way that did not apply the request (a connection refused before
// sending, a 503 for a read): repeating it is safe.
type TransientError struct {
	Op         string
	StatusCode int
	Err        error
}

func (e *TransientError) Error() string {
	return fmt.Sprintf("provider: %s: transient failure (status %d): %v", e.Op, e.StatusCode, e.Err)
}

func (e *TransientError) Unwrap() error { return e.Err }

// PermanentError is a request the provider rejected and will reject again (400, 404, 422,
// idempotency_error). Code is the provider's error code when it gave one.
type PermanentError struct {
	Op         string
	StatusCode int
	Code       string
	Err        error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("provider: %s: rejected (status %d, code %q): %v", e.Op, e.StatusCode, e.Code, e.Err)
}

func (e *PermanentError) Unwrap() error { return e.Err }

// Is makes errors.Is work with ErrNotFound, ErrIdempotencyMismatch, ErrUnexpectedState and
// ErrRefundTooLarge.
func (e *PermanentError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrIdempotencyMismatch:
		return e.Code == "idempotency_error"
	case ErrUnexpectedState:
		return e.Code == "payment_intent_unexpected_state" || e.Code == "charge_not_refundable"
	case ErrRefundTooLarge:
		return e.Op == "refund" && (e.Code == "amount_too_large" || e.Code == "charge_already_refunded")
	}
	return false
}

// CredentialsError is a 401 or 403: the API key is wrong, revoked or lacks a permission. Never
// retried; it needs an operator, so callers alert on it.
type CredentialsError struct {
	Op         string
	StatusCode int
	Err        error
}

func (e *CredentialsError) Error() string {
	return fmt.Sprintf("provider: %s: credentials rejected (status %d): %v", e.Op, e.StatusCode, e.Err)
}

func (e *CredentialsError) Unwrap() error { return e.Err }
