package signature

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/runtwice/twice/shared/webhooks"
)

// StripeVerifier verifies Stripe-Signature with stripe-go's webhook package (HMAC-SHA256 over
// "t.body", compared in constant time, any v1 entry may match) against every active secret, and
// checks the timestamp itself on the injected clock in both directions.
//
// Build it with NewStripeVerifier, which checks the secrets once.
type StripeVerifier struct {
	// Secrets are the endpoint secrets (whsec_...); several are active while one is rolled.
	Secrets []string
	// Now is the clock of the timestamp check (default time.Now).
	Now func() time.Time
	// Tolerance is the accepted clock distance in both directions (<= 0: webhooks.DefaultTolerance).
	Tolerance time.Duration

	secrets []string
}

var _ webhooks.Verifier = (*StripeVerifier)(nil)

// NewStripeVerifier returns v ready to verify. Empty secrets are ignored; none left is
// webhooks.ErrNoSecret.
func NewStripeVerifier(v StripeVerifier) (*StripeVerifier, error) {
	var s []string
	for _, sec := range v.Secrets {
		if sec = strings.TrimSpace(sec); sec != "" {
			s = append(s, sec)
		}
	}
	if len(s) == 0 {
		return nil, webhooks.ErrNoSecret
	}
	v.secrets = s
	return &v, nil
}

// Verify checks the signature first and the timestamp second, so webhooks.ErrTooOld and webhooks.ErrTooNew mean
// "authentic but out of window" (a replay or a skewed clock), which is worth telling apart in logs.
func (v *StripeVerifier) Verify(h http.Header, body []byte) error {
	vals := h.Values(webhooks.StripeSignatureHeader)
	if len(vals) == 0 || vals[0] == "" {
		return webhooks.ErrMissingHeader
	}
	if len(vals) > 1 {
		return fmt.Errorf("%w: %d %s headers", webhooks.ErrBadHeader, len(vals), webhooks.StripeSignatureHeader)
	}
	sh, err := ParseStripeSignature(vals[0])
	if err != nil {
		return err
	}
	if sh.Signatures == 0 {
		return webhooks.ErrNoValidSignature
	}
	// stripe-go's tolerance check reads time.Now; ours uses the injected clock, so the library
	// only does what it is best at: the MAC comparison.
	return firstMatch(window{v.Now, v.Tolerance}, sh.Timestamp, v.secrets, func(sec string) error {
		return mapStripeErr(webhook.ValidatePayloadIgnoringTolerance(body, vals[0], sec))
	})
}

func mapStripeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhook.ErrNotSigned):
		return webhooks.ErrMissingHeader
	case errors.Is(err, webhook.ErrInvalidHeader):
		return webhooks.ErrBadHeader
	case errors.Is(err, webhook.ErrNoValidSignature):
		return webhooks.ErrNoValidSignature
	default:
		return fmt.Errorf("%w: %v", webhooks.ErrBadHeader, err)
	}
}

// StripeSignature is the parsed shape of a Stripe-Signature header.
type StripeSignature struct {
	Timestamp  time.Time
	Signatures int // count of v1 entries, well-formed or not
}

// ParseStripeSignature reads the timestamp of a Stripe-Signature header with the same grammar
// stripe-go accepts (comma-separated key=value pairs, unknown keys ignored). It rejects a header
// with no t or with more than one: stripe-go signs against the last t, so a checker that read the
// first could be fooled into accepting a replay with a fresh t prepended.
func ParseStripeSignature(header string) (StripeSignature, error) {
	var sh StripeSignature
	if header == "" {
		return sh, webhooks.ErrMissingHeader
	}
	seenT := false
	for _, pair := range strings.Split(header, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(val, "=") {
			return sh, fmt.Errorf("%w: pair is not key=value", webhooks.ErrBadHeader)
		}
		switch k {
		case "t":
			if seenT {
				return sh, fmt.Errorf("%w: more than one t", webhooks.ErrBadHeader)
			}
			seenT = true
			sec, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return sh, fmt.Errorf("%w: t is not an integer", webhooks.ErrBadHeader)
			}
			sh.Timestamp = time.Unix(sec, 0)
		case "v1":
			sh.Signatures++
		}
	}
	if !seenT {
		return sh, fmt.Errorf("%w: no t", webhooks.ErrBadHeader)
	}
	return sh, nil
}
