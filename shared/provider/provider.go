package provider

import (
	"context"
	"iter"
	"time"
)

// Provider is the contract the payments API, recovery and reconciliation call. The Stripe
// adapter implements it; retry.Provider wraps any implementation with the outbound retry policy.
//
// Errors are the typed errors of this package (errors.go); a card decline returns the declined
// Payment and a *DeclineError carrying the same Payment.
type Provider interface {
	// Create creates and confirms a payment in one call.
	Create(ctx context.Context, req CreateRequest) (Payment, error)
	// Get returns the provider's current view of a payment.
	Get(ctx context.Context, id string) (Payment, error)
	// Confirm confirms an existing payment, optionally with a new payment method.
	Confirm(ctx context.Context, req ConfirmRequest) (Payment, error)
	// List yields every payment matching p, fetching pages as the caller ranges; a failure is
	// yielded once as the error and ends the sequence.
	List(ctx context.Context, p ListParams) iter.Seq2[Payment, error]
	// PaymentMethodCard returns the card behind a payment method (Stripe: the PaymentMethod's
	// card.fingerprint and card.brand), so that a charge with a payment method other than the
	// declined one is counted on its own card's ledger. A payment method that is not a card
	// (or whose card has no fingerprint) is ErrNotCard; an unknown one a *PermanentError
	// matching ErrNotFound.
	PaymentMethodCard(ctx context.Context, paymentMethod string) (Card, error)
}

// Status is a payment's state in our vocabulary, not the provider's.
type Status string

// The statuses a payment can have. DESIGN.md names the first five for the API; canceled exists
// because a provider can cancel an intent and reconciliation must be able to say so.
const (
	StatusPending    Status = "pending"    // created, awaiting confirmation or customer action
	StatusProcessing Status = "processing" // the provider is still working on it
	StatusSucceeded  Status = "succeeded"
	StatusDeclined   Status = "declined" // the last attempt was declined; see Payment.Decline
	StatusRefunded   Status = "refunded"
	StatusCanceled   Status = "canceled"
)

// Final reports whether no further provider-side change is expected without a new action of ours.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusDeclined, StatusRefunded, StatusCanceled:
		return true
	}
	return false
}

// Payment is a provider payment (a Stripe PaymentIntent) in our vocabulary.
type Payment struct {
	ID            string
	Status        Status
	Amount        int64 // minor units
	Currency      string
	Customer      string
	PaymentMethod string
	Description   string
	Created       time.Time
	Metadata      map[string]string
	// Decline is set when Status is StatusDeclined.
	Decline *Decline
	// AmountRefunded is what the provider refunded of the payment so far (its latest charge's
	// amount_refunded, when the adapter reads it).
	AmountRefunded int64
	// Card is the charged card when the provider said which (Stripe: a declined attempt's
	// payment_method.card); nil otherwise.
	Card *Card
}

// Card identifies the physical card behind a payment method: Fingerprint is the same for every
// payment method of one card number (Stripe's payment_method.card.fingerprint), so the network
// caps, which are per card, are counted on it.
type Card struct {
	Fingerprint string
	Brand       string // visa, mastercard, amex, ...
	Last4       string
}

// Decline is what the provider and the card network said about a declined attempt: the inputs of
// the decline classifier (provider advice first, then network advice, then the codes).
type Decline struct {
	Code               string // Stripe decline_code, or the error code when no decline_code is given (expired_card, incorrect_cvc)
	ErrorCode          string // Stripe error code (card_declined, expired_card, ...)
	AdviceCode         string // Stripe advice_code: do_not_try_again, confirm_card_data, try_again_later
	NetworkAdviceCode  string // e.g. a Mastercard Merchant Advice Code ("03", "24")
	NetworkDeclineCode string // the raw network response code ("51", "05")
	Network            string // card brand when known: visa, mastercard, ...
	Message            string // the provider's message; not for end users
}

// CreateRequest asks for a payment to be created and confirmed.
type CreateRequest struct {
	Amount        int64
	Currency      string
	Customer      string
	PaymentMethod string
	Description   string
	Metadata      map[string]string
	// OffSession marks a merchant-initiated charge (recovery attempts): the customer is absent.
	OffSession bool
	// IdempotencyKey is the provider idempotency key (IdempotencyKey or AttemptKey). Required:
	// without it a retry could charge twice, so the retry policy never repeats a keyless create.
	IdempotencyKey string
}

// ConfirmRequest confirms an existing payment.
type ConfirmRequest struct {
	ID             string
	PaymentMethod  string // optional: a new payment method for this attempt
	OffSession     bool
	IdempotencyKey string
}

// ListParams selects payments by creation time (inclusive bounds) and customer.
type ListParams struct {
	CreatedFrom time.Time // zero: unbounded
	CreatedTo   time.Time // zero: unbounded
	Customer    string
	// StartingAfter resumes a listing after this payment id (provider order: newest first).
	StartingAfter string
}
