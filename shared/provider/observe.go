package provider

import (
	"context"
	"time"
)

// Call is one HTTP exchange of a provider adapter (stripeprovider) with the provider's API, as
// the attempt log needs it. It never holds the API key: the Authorization header is not copied.
// Bodies are as sent and received; redaction and capping belong to the attempt log. It is
// declared here, not in the adapter, so the attempt log links no provider SDK.
type Call struct {
	Method         string
	Path           string // URL path, e.g. /v1/payment_intents
	Query          string // raw query string (list filters, pagination)
	RequestBody    []byte // form-encoded body as sent; nil for GET
	IdempotencyKey string
	StatusCode     int    // 0 when no response arrived
	RequestID      string // the provider's Request-Id, for support tickets
	RetryAfter     string // the raw Retry-After header, when sent
	// Replayed: the provider answered from its idempotency cache (Idempotent-Replayed: true),
	// so this exchange had no new effect.
	Replayed     bool
	ResponseBody []byte
	Started      time.Time
	Duration     time.Duration
	Err          error // the transport error when no (complete) response arrived
}

// Observer receives every Call a provider adapter makes, after it ends. Observe runs on the request
// path: keep it fast and never let it fail the call.
type Observer interface {
	Observe(ctx context.Context, c Call)
}
