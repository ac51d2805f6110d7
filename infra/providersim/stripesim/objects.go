package stripesim

import "encoding/json"

// PaymentIntent is the stored and returned PaymentIntent, shaped like Stripe's so that
// stripe-go decodes it. Nullable Stripe fields are pointers and marshal as null.
type PaymentIntent struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *CardError        `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	NextAction         *NextAction       `json:"next_action"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	ReceiptEmail       *string           `json:"receipt_email"`
	SetupFutureUsage   *string           `json:"setup_future_usage"`
	Status             string            `json:"status"`
}

// NextAction is a PaymentIntent's next_action while it requires action: use_stripe_sdk
// (Stripe.js authenticates in place with the client secret), or redirect_to_url when the
// confirm gave a return_url.
type NextAction struct {
	Type          string         `json:"type"`
	RedirectToURL *RedirectToURL `json:"redirect_to_url,omitempty"`
	UseStripeSDK  map[string]any `json:"use_stripe_sdk,omitempty"`
}

// RedirectToURL is next_action.redirect_to_url.
type RedirectToURL struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

// PaymentIntent statuses used by the simulator (Stripe's values).
const (
	StatusRequiresPaymentMethod = "requires_payment_method"
	StatusRequiresConfirmation  = "requires_confirmation"
	StatusRequiresAction        = "requires_action"
	StatusRequiresCapture       = "requires_capture"
	StatusProcessing            = "processing"
	StatusSucceeded             = "succeeded"
	StatusCanceled              = "canceled"
)

// CardError is Stripe's error object for a card decline, as found both in
// last_payment_error and in the 402 error envelope.
type CardError struct {
	Type               string          `json:"type"`
	Code               string          `json:"code"`
	DeclineCode        string          `json:"decline_code,omitempty"`
	Message            string          `json:"message"`
	AdviceCode         string          `json:"advice_code,omitempty"`
	NetworkAdviceCode  string          `json:"network_advice_code,omitempty"`
	NetworkDeclineCode string          `json:"network_decline_code,omitempty"`
	DocURL             string          `json:"doc_url,omitempty"`
	Param              string          `json:"param,omitempty"`
	Charge             string          `json:"charge,omitempty"`
	PaymentMethod      *PaymentMethod  `json:"payment_method,omitempty"`
	PaymentIntent      json.RawMessage `json:"payment_intent,omitempty"`
	RequestLogURL      string          `json:"request_log_url,omitempty"`
}

// PaymentMethod is the card PaymentMethod embedded in a card error.
type PaymentMethod struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Type     string            `json:"type"`
	Card     PaymentMethodCard `json:"card"`
	Created  int64             `json:"created"`
	Customer *string           `json:"customer"`
	Livemode bool              `json:"livemode"`
	Metadata map[string]string `json:"metadata"`
}

// PaymentMethodCard is the card detail of a PaymentMethod.
type PaymentMethodCard struct {
	Brand    string `json:"brand"`
	Country  string `json:"country"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	Funding  string `json:"funding"`
	Last4    string `json:"last4"`
	// Fingerprint is the same for every PaymentMethod of one card number, like Stripe's.
	Fingerprint string `json:"fingerprint"`
}

// apiError is Stripe's non-card error object.
type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	DocURL  string `json:"doc_url,omitempty"`
}

// Stripe error types.
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeAPI            = "api_error"
	errTypeCard           = "card_error"
	errTypeIdempotency    = "idempotency_error"
)

// listResponse is Stripe's list envelope.
type listResponse struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
}

// Event is a Stripe event as delivered to the webhook endpoint.
type Event struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            EventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int          `json:"pending_webhooks"`
	Request         EventRequest `json:"request"`
	Type            string       `json:"type"`
}

// EventData holds the object snapshot at the time of the event.
type EventData struct {
	Object json.RawMessage `json:"object"`
	// PreviousAttributes holds the changed fields' old values (customer.updated).
	PreviousAttributes json.RawMessage `json:"previous_attributes,omitempty"`
}

// EventRequest names the API request that caused the event; both are null for
// changes made through the simulator's controls.
type EventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}
