package webhooks

import (
	"context"
	"net/http"
	"time"
)

// Provider names: the {provider} path segment of POST /webhooks/{provider}.
const (
	ProviderStripe   = "stripe"
	ProviderStandard = "standard"
)

// DefaultTolerance is how far a signed timestamp may be from our clock, in either direction.
const DefaultTolerance = 300 * time.Second

// Verifier checks that a delivery was signed by the provider, recently.
// It returns nil or an error wrapping one of the sentinels (ErrMissingHeader, ErrBadHeader,
// ErrNoValidSignature, ErrTooOld, ErrTooNew). Errors never carry a secret or a signature.
type Verifier interface {
	Verify(header http.Header, body []byte) error
}

// window is the timestamp check both verifiers apply: Now defaults to time.Now and a
// Tolerance <= 0 to DefaultTolerance, so a verifier always checks timestamps.
type window struct {
	now       func() time.Time
	tolerance time.Duration
}

// checkTimestamp applies the window both ways. Stripe-go checks only age; a timestamp far in the
// future would let a captured delivery be replayed for longer than the window.
func (w window) checkTimestamp(ts time.Time) error {
	now, tolerance := time.Now(), w.tolerance
	if w.now != nil {
		now = w.now()
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if now.Sub(ts) > tolerance {
		return ErrTooOld
	}
	if ts.Sub(now) > tolerance {
		return ErrTooNew
	}
	return nil
}

// Verifiers finds the verifier for a provider name, or returns ErrUnknownProvider.
// The ingest handler calls it on every delivery, so a source backed by rotating secrets can hand
// out a verifier built from the current ones.
type Verifiers interface {
	Verifier(ctx context.Context, provider string) (Verifier, error)
}

// Static is a fixed set of verifiers keyed by provider name.
type Static map[string]Verifier

var _ Verifiers = Static(nil)

// Verifier returns the verifier registered under provider.
func (s Static) Verifier(_ context.Context, provider string) (Verifier, error) {
	v, ok := s[provider]
	if !ok {
		return nil, ErrUnknownProvider
	}
	return v, nil
}
