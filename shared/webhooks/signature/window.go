package signature

import (
	"errors"
	"time"

	"github.com/runtwice/twice/shared/webhooks"
)

// window is the timestamp check both verifiers apply: Now defaults to time.Now and a
// Tolerance <= 0 to webhooks.DefaultTolerance, so a verifier always checks timestamps.
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
		tolerance = webhooks.DefaultTolerance
	}
	if now.Sub(ts) > tolerance {
		return webhooks.ErrTooOld
	}
	if ts.Sub(now) > tolerance {
		return webhooks.ErrTooNew
	}
	return nil
}

// firstMatch is how both verifiers use their active secrets: mac checks the delivery under one
// secret (the library's MAC comparison, the timestamp ignored, its error mapped to ours). The
// first secret that matches hands over to the timestamp check; an error other than
// webhooks.ErrNoValidSignature (a malformed header) ends the search.
func firstMatch[S any](w window, ts time.Time, secrets []S, mac func(S) error) error {
	for _, sec := range secrets {
		err := mac(sec)
		if err == nil {
			return w.checkTimestamp(ts)
		}
		if !errors.Is(err, webhooks.ErrNoValidSignature) {
			return err
		}
	}
	return webhooks.ErrNoValidSignature
}
