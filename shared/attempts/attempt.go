package attempts

import (
	"context"
	"time"
)

// Direction says who called whom.
type Direction string

const (
	// Outbound is a call twice made to a provider.
	Outbound Direction = "outbound"
	// Inbound is a delivery a provider (or a caller) made to twice.
	Inbound Direction = "inbound"
)

// Results the capture helpers assign. Callers that know better (a Stripe adapter reading a
// decline code, a webhook verifier) set their own, e.g. ResultRejectedSignature.
const (
	ResultOK                = "ok"
	ResultDeclined          = "declined"     // 402: the provider answered, the card was declined
	ResultRateLimited       = "rate_limited" // 429
	ResultRejected          = "rejected"     // other 4xx
	ResultServerError       = "server_error" // 5xx
	ResultTimeout           = "timeout"      // deadline or network timeout: the outcome is unknown
	ResultError             = "error"        // transport error other than a timeout
	ResultRejectedSignature = "rejected_signature"
	ResultReset             = "reset" // the connection broke after the request was sent: unknown
)

// Attempt is one outbound provider call or one inbound delivery, as stored.
//
// Bodies, headers, the path and Err are redacted before they are stored (see Attempt.Redacted);
// RequestTruncated and ResponseTruncated say a body was cut at the cap, and RequestBytes and
// ResponseBytes give the size seen before the cut.
type Attempt struct {
	ID        string    `json:"id"`
	Direction Direction `json:"direction"`
	Provider  string    `json:"provider"`
	// Operation names what was attempted: "payment_intents.create", "webhook stripe".
	Operation string `json:"operation"`

	Method            string            `json:"method"`
	Path              string            `json:"path"` // path and query
	RequestHeader     map[string]string `json:"request_header,omitempty"`
	RequestBody       string            `json:"request_body,omitempty"`
	RequestBytes      int               `json:"request_bytes"`
	RequestTruncated  bool              `json:"request_truncated,omitempty"`
	Status            int               `json:"status"` // 0 when no response came back
	ResponseHeader    map[string]string `json:"response_header,omitempty"`
	ResponseBody      string            `json:"response_body,omitempty"`
	ResponseBytes     int               `json:"response_bytes"`
	ResponseTruncated bool              `json:"response_truncated,omitempty"`
	Err               string            `json:"err,omitempty"`

	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"` // until the response headers (or the error)

	// The lookup keys: an attempt can be found by each one that is set. They are stored
	// redacted and capped like every other field (a key that is a card number is shown
	// masked), and filed under a digest of their exact values (indexPK).
	IdempotencyKey    string `json:"idempotency_key,omitempty"`
	PaymentID         string `json:"payment_id,omitempty"`
	EventID           string `json:"event_id,omitempty"`
	ProviderPaymentID string `json:"provider_payment_id,omitempty"`
	Invoice           string `json:"invoice,omitempty"`
	// CardBrand and CardLast4 are the card the provider named in its answer, where it did
	// (a decline names it): an operator tells cards apart by them.
	CardBrand string `json:"card_brand,omitempty"`
	CardLast4 string `json:"card_last4,omitempty"`
	// Livemode is the provider's mode as its answer or event named it (Stripe's livemode):
	// nil when it named none. It stays in the lookup's summaries, so a post-deploy check can
	// tell a test-mode deployment from a live one without reading bodies.
	Livemode *bool `json:"livemode,omitempty"`
	// Scope is the caller scope of an API request (the authorizer principal, "local").
	Scope string `json:"scope,omitempty"`

	// Refused marks an inbound delivery that failed verification. A refused attempt is never
	// filed under the ids it claims (anyone can claim any id): it is stored in the refused
	// partition of its day, with where it came from and a hash of its body, and each id it
	// claims only counts towards "an unverified delivery claimed this id" (Page.UnverifiedClaims).
	Refused bool `json:"refused,omitempty"`
	// Claimed are the ids a refused delivery claimed (event id, payment id), capped.
	Claimed []string `json:"claimed,omitempty"`
	// Source says where an inbound delivery came from: the peer address, and the request id
	// when the sender gave one.
	Source string `json:"source,omitempty"`
	// BodySHA256 is the hex SHA-256 of the whole body as received (before redaction or cap).
	BodySHA256 string `json:"body_sha256,omitempty"`

	CorrelationID string `json:"correlation_id,omitempty"`
	Result        string `json:"outcome"`
	// Replayed marks an answer given from an idempotency record (Idempotent-Replayed: true):
	// ours to a caller's repeated request, or the provider's to ours. Summary sets it from the
	// response headers it drops.
	Replayed bool `json:"replayed,omitempty"`
}

// IsReplay reports whether the answer was a replay (Idempotent-Replayed: true).
func (a Attempt) IsReplay() bool {
	return a.Replayed || a.ResponseHeader["Idempotent-Replayed"] == "true"
}

// Recorder stores attempts. Packages that make or receive provider calls depend on this, not
// on Log.
//
// Recording must never fail the caller's payment: a caller that gets an error logs it and
// carries on (BestEffort does exactly that).
type Recorder interface {
	Record(ctx context.Context, a Attempt) error
}

var _ Recorder = (*Log)(nil)

// resultFor is the default result of a call that answered status, or failed with err.
func resultFor(status int, err error, timeout bool) string {
	switch {
	case timeout:
		return ResultTimeout
	case err != nil:
		return ResultError
	case status >= 200 && status < 300:
		return ResultOK
	case status == 402:
		return ResultDeclined
	case status == 429:
		return ResultRateLimited
	case status >= 400 && status < 500:
		return ResultRejected
	case status >= 500:
		return ResultServerError
	}
	return ResultOK
}

// Summary is the attempt without headers and bodies, as Lookup returns it.
func (a Attempt) Summary() Attempt {
	a.Replayed = a.IsReplay()
	a.RequestHeader, a.ResponseHeader = nil, nil
	a.RequestBody, a.ResponseBody = "", ""
	return a
}

type lookupKey struct {
	by           By
	scope, value string
}

// lookupKeys are the keys an attempt is filed under, as given: a caller's idempotency key in
// its scope (an outbound call has none: its key is the provider key, filed unscoped).
func (a Attempt) lookupKeys() []lookupKey {
	return []lookupKey{{ByIdempotencyKey, a.Scope, a.IdempotencyKey}, {ByPaymentID, "", a.PaymentID}, {ByEventID, "", a.EventID},
		{ByProviderPaymentID, "", a.ProviderPaymentID}, {ByInvoice, "", a.Invoice}}
}
