package provider

import (
	"context"
	"encoding/json"
	"iter"
	"log/slog"
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

// Status is a payment's state in our vocabulary, not the provider's: the one set of payment
// statuses, which the payments API shows, the payment record stores and reconciliation
// compares. Every provider state maps to exactly one of them (the adapter maps its wire
// strings once); none maps to StatusPending, which the payments API keeps for one meaning
// only: our call's outcome is unknown and being resolved (no provider state says that).
type Status string

// The statuses. They are untyped constants, so that a Status and the string status of a
// stored payment or an API answer compare with the same names.
//
// Stripe's PaymentIntent statuses map as follows (stripeprovider):
//
//	requires_action                           StatusRequiresAction (NextAction says what the customer does)
//	requires_confirmation                     StatusRequiresAction (behaves the same for us: it waits for
//	                                          the customer's side; our creates always confirm)
//	requires_payment_method, no error yet     StatusRequiresAction (it waits for a payment method)
//	requires_payment_method after an attempt  StatusDeclined (Payment.Decline says why, authentication
//	                                          failures included)
//	requires_capture                          StatusRequiresCapture (authorized; AmountCapturable, CaptureBefore)
//	processing                                StatusProcessing
//	succeeded                                 StatusSucceeded, or StatusRefunded once the charge is refunded
//	                                          in full (partly refunded: succeeded with AmountRefunded > 0)
//	canceled                                  StatusCanceled
//	any status Stripe adds later              StatusProcessing (not final: look again)
const (
	// StatusPending is ours alone: our call's outcome is unknown and being resolved (no
	// provider payment is ever in it).
	StatusPending = "pending"
	// StatusRequiresAction: the customer must act before the payment can go on, usually
	// authenticate (3-D Secure). The Payment carries ClientSecret and NextAction for the
	// customer's browser. Not final: the customer's action, a webhook or a cancel moves it;
	// a payment of ours is canceled once it has waited longer than the customer window
	// (payments.Bounds.CustomerWindow).
	StatusRequiresAction = "requires_action"
	// StatusRequiresCapture: authorized and held (capture_method manual); Capture takes the
	// money, Cancel releases it, and the hold lapses at CaptureBefore. Not final.
	StatusRequiresCapture = "requires_capture"
	StatusProcessing      = "processing" // the provider is still working on it
	StatusSucceeded       = "succeeded"  // captured; partly refunded: AmountRefunded > 0
	StatusDeclined        = "declined"   // the last attempt was declined; see Payment.Decline
	StatusRefunded        = "refunded"   // refunded in full
	// StatusCanceled: canceled before it was captured, nothing was charged; or a pending
	// payment of ours turned out never to have reached the provider.
	StatusCanceled = "canceled"
)

// Final reports whether no further provider-side change is expected without a new action of
// ours. pending, requires_action, requires_capture and processing are still moving.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusDeclined, StatusRefunded, StatusCanceled:
		return true
	}
	return false
}

// ClientSecret is the secret a customer's browser (Stripe.js) uses to complete a payment that
// requires action. It is a credential: whoever holds it can confirm the payment as the
// customer. Its String, GoString, LogValue and MarshalJSON all redact it, so it cannot reach a
// log line, an error message or a JSON document by accident; the one place that hands it to
// the customer (the payments API's answer) calls Reveal.
type ClientSecret string

// Reveal returns the secret itself, for the answer to the customer's own request only.
func (c ClientSecret) Reveal() string { return string(c) }

// String redacts the secret.
func (c ClientSecret) String() string {
	if c == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts the secret (%#v).
func (c ClientSecret) GoString() string { return `"` + c.String() + `"` }

// LogValue redacts the secret in slog lines.
func (c ClientSecret) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON redacts the secret: a Payment marshalled for a log or a queue never carries it.
func (c ClientSecret) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// NextAction is what the customer must do for a payment in StatusRequiresAction.
type NextAction struct {
	// Type is the provider's action type: Stripe's use_stripe_sdk (Stripe.js handles it with the
	// client secret) or redirect_to_url (send the customer to RedirectURL).
	Type string
	// RedirectURL is where to send the customer, when Type is redirect_to_url.
	RedirectURL string
}

// CaptureMethod says when an authorized payment is captured.
type CaptureMethod string

// The capture methods. The zero value is the provider's automatic capture.
const (
	CaptureAutomatic CaptureMethod = ""
	// CaptureManual authorizes only: the payment stops in StatusRequiresCapture until Capture
	// or Cancel (or the authorization lapses at CaptureBefore).
	CaptureManual CaptureMethod = "manual"
)

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
	// CaptureMethod is how the payment is captured (CaptureManual: authorize, then Capture).
	CaptureMethod CaptureMethod
	// AmountCapturable is what a Capture may still take (StatusRequiresCapture), else 0.
	AmountCapturable int64
	// AmountReceived is what was captured: Amount, or less after a partial capture. Refunds
	// are bounded by it.
	AmountReceived int64
	// CaptureBefore is when an uncaptured authorization lapses (Stripe:
	// latest_charge.payment_method_details.card.capture_before, about 7 days after the
	// authorization for most cards); zero when unknown or not held. Reads (Get) and Capture,
	// Cancel and manual-capture Creates carry it.
	CaptureBefore time.Time
	// LatestCharge is the provider's id of the latest charge attempt (Stripe: ch_...), when
	// there is one.
	LatestCharge string
	// NextAction says what the customer must do; set only in StatusRequiresAction.
	NextAction *NextAction
	// ClientSecret lets the customer's browser complete the action; set only in
	// StatusRequiresAction. A credential: never log it (its own methods redact it).
	ClientSecret ClientSecret
	// CancellationReason is the provider's reason for a StatusCanceled payment, when given.
	CancellationReason string
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
	// OffSession marks a merchant-initiated charge (a renewal, a recovery attempt): the customer
	// is absent, so a payment that needs authentication is declined (authentication_required)
	// instead of waiting in StatusRequiresAction.
	OffSession bool
	// CaptureMethod CaptureManual authorizes only (StatusRequiresCapture); zero captures at once.
	CaptureMethod CaptureMethod
	// ReturnURL, when set, is where the provider sends the customer back after an
	// authentication by redirect; the NextAction is then redirect_to_url. Without it Stripe
	// answers use_stripe_sdk (the browser's Stripe.js authenticates in place).
	ReturnURL string
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
