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

// Option configures a verifier.
type Option func(*config)

type config struct {
	now       func() time.Time
	tolerance time.Duration
}

func newConfig(opts []Option) config {
	c := config{now: time.Now, tolerance: DefaultTolerance}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithClock sets the clock the timestamp checks use (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithTolerance sets the accepted clock distance in both directions (default 300 s).
// Values <= 0 are ignored: a verifier always checks timestamps.
func WithTolerance(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.tolerance = d
		}
	}
}

// checkTimestamp applies the window both ways. Stripe-go checks only age; a timestamp far in the
// future would let a captured delivery be replayed for longer than the window.
func (c config) checkTimestamp(ts time.Time) error {
	now := c.now()
	if now.Sub(ts) > c.tolerance {
		return ErrTooOld
	}
	if ts.Sub(now) > c.tolerance {
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
