package provider

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Operations are the provider calls on a payment that already exists: capture or cancel an
// authorization, refund a captured payment, and list its refunds. They are a second interface,
// beside Provider, so that code which only creates and reads payments (and its test doubles)
// need not implement them. The Stripe adapter (stripeprovider.Client and SecretKeyed), the
// in-memory providertest.Fake and the retry wrapper (retry.Provider) implement both; the
// payments API takes a value that implements both.
//
// Every write carries an IdempotencyKey (CaptureKey, CancelKey, RefundKey, AutoCancelKey) and
// is refused without one (ErrMissingIdempotencyKey): with it, an unknown outcome may be
// repeated with the same key, exactly like Create and Confirm. Errors are the typed errors of
// errors.go; a call the payment's state does not allow (capturing what is not
// requires_capture, canceling a succeeded payment) is a *PermanentError matching
// ErrUnexpectedState, and a refund of more than remains one matching ErrRefundTooLarge.
type Operations interface {
	// Capture takes an authorized payment's money (StatusRequiresCapture -> StatusSucceeded):
	// AmountToCapture of it, or all of AmountCapturable when zero. The rest of the hold is
	// released. The answer is the captured Payment (AmountReceived is what was taken).
	Capture(ctx context.Context, req CaptureRequest) (Payment, error)
	// Cancel cancels a payment that has not succeeded (requires_action, requires_capture, a
	// declined one awaiting a new payment method, processing where the provider allows it):
	// nothing is charged and a hold is released. The answer is the canceled Payment.
	Cancel(ctx context.Context, req CancelRequest) (Payment, error)
	// Refund refunds a captured payment, Amount of it or all that remains when zero. A refund
	// may answer pending and settle later, and a succeeded one may still fail later (the money
	// could not reach the card): Refunds and the provider's refund events say so.
	Refund(ctx context.Context, req RefundRequest) (Refund, error)
	// Refunds yields every refund of one payment, newest first, fetching pages as the caller
	// ranges; a failure is yielded once and ends the sequence. Reconciliation compares them
	// with ours.
	Refunds(ctx context.Context, p RefundListParams) iter.Seq2[Refund, error]
}

// ErrOperationsUnsupported: the wrapped provider does not implement Operations.
var ErrOperationsUnsupported = errors.New("provider: capture, cancel and refunds not supported")

// CaptureRequest captures an authorized payment.
type CaptureRequest struct {
	ID string // the provider's payment id
	// AmountToCapture is what to take, at most AmountCapturable; zero: all of it.
	AmountToCapture int64
	IdempotencyKey  string // CaptureKey
}

// CancelReason is why a payment is canceled, in the provider's words.
type CancelReason string

// The cancellation reasons Stripe accepts. The zero value sends none.
const (
	CancelDuplicate           CancelReason = "duplicate"
	CancelFraudulent          CancelReason = "fraudulent"
	CancelRequestedByCustomer CancelReason = "requested_by_customer"
	// CancelAbandoned: the customer never completed the payment (a requires_action left past
	// its window), or an authorization was not captured in time.
	CancelAbandoned CancelReason = "abandoned"
)

// CancelRequest cancels a payment that has not succeeded.
type CancelRequest struct {
	ID             string // the provider's payment id
	Reason         CancelReason
	IdempotencyKey string // CancelKey, or AutoCancelKey for a cancel our own timers decide
}

// RefundReason is why a payment is refunded, in the provider's words.
type RefundReason string

// The refund reasons Stripe accepts. The zero value sends none.
const (
	RefundDuplicate           RefundReason = "duplicate"
	RefundFraudulent          RefundReason = "fraudulent"
	RefundRequestedByCustomer RefundReason = "requested_by_customer"
)

// RefundRequest refunds a captured payment.
type RefundRequest struct {
	Payment string // the provider's payment id
	// Amount is what to refund, at most what remains; zero: all that remains.
	Amount         int64
	Reason         RefundReason
	Metadata       map[string]string
	IdempotencyKey string // RefundKey
}

// RefundStatus is a refund's state at the provider.
type RefundStatus string

// The refund statuses (untyped, like the payment statuses, so the refund ledger's string
// statuses compare with the same names). A refund is pending until the provider settles it;
// succeeded may still turn into failed later (the card was closed); failed and canceled gave
// the money back to the refundable amount.
const (
	// RefundReserved is ours alone: a refund asked for through the API holds its amount before
	// the provider is called (no provider refund is ever in it). The API shows it as pending.
	RefundReserved  = "reserved"
	RefundPending   = "pending"
	RefundSucceeded = "succeeded"
	RefundFailed    = "failed"
	RefundCanceled  = "canceled"
)

// Refund is a provider refund (a Stripe Refund) in our vocabulary.
type Refund struct {
	ID       string // the provider's refund id (re_...)
	Payment  string // the provider's payment id it refunds
	Amount   int64  // minor units
	Currency string
	Status   RefundStatus
	Reason   RefundReason
	// FailureReason is the provider's reason for a RefundFailed refund (Stripe:
	// expired_or_canceled_card, lost_or_stolen_card, declined, unknown, ...).
	FailureReason string
	Created       time.Time
	Metadata      map[string]string
}

// RefundListParams selects the refunds of one payment.
type RefundListParams struct {
	Payment string // the provider's payment id; required
	// StartingAfter resumes a listing after this refund id (provider order: newest first).
	StartingAfter string
}
