package signature

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/runtwice/twice/shared/webhooks"
)

// StandardVerifier verifies Standard Webhooks deliveries with the reference Go library
// (github.com/standard-webhooks/standard-webhooks/libraries/go). The library holds one secret and
// reads time.Now with a package-level tolerance, so this wraps it: one library verifier per active
// secret, its signature check only (VerifyIgnoringTimestamp), and our timestamp check on the
// injected clock. Build it with NewStandardVerifier, which decodes the secrets once.
type StandardVerifier struct {
	// Secrets are of the form whsec_<base64> (the prefix is optional).
	Secrets []string
	// Now is the clock of the timestamp check (default time.Now).
	Now func() time.Time
	// Tolerance is the accepted clock distance in both directions (<= 0: webhooks.DefaultTolerance).
	Tolerance time.Duration

	hooks []*standardwebhooks.Webhook
}

var _ webhooks.Verifier = (*StandardVerifier)(nil)

// NewStandardVerifier returns v ready to verify, its secrets decoded. A secret that is not base64 or decodes to nothing is webhooks.ErrBadSecret; none at all is
// webhooks.ErrNoSecret. The error names the secret's position, never its value.
func NewStandardVerifier(v StandardVerifier) (*StandardVerifier, error) {
	v.hooks = nil
	for i, sec := range v.Secrets {
		sec = strings.TrimSpace(sec)
		if sec == "" {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, "whsec_"))
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("%w: secret #%d is not whsec_<base64>", webhooks.ErrBadSecret, i)
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return nil, fmt.Errorf("%w: secret #%d", webhooks.ErrBadSecret, i)
		}
		v.hooks = append(v.hooks, wh)
	}
	if len(v.hooks) == 0 {
		return nil, webhooks.ErrNoSecret
	}
	return &v, nil
}

// Verify checks headers, then the signature against each secret, then the timestamp.
func (v *StandardVerifier) Verify(h http.Header, body []byte) error {
	sh, err := ParseStandardHeaders(h)
	if err != nil {
		return err
	}
	if sh.Signatures == 0 {
		return webhooks.ErrNoValidSignature
	}
	return firstMatch(window{v.Now, v.Tolerance}, sh.Timestamp, v.hooks, func(wh *standardwebhooks.Webhook) error {
		return mapStandardErr(wh.VerifyIgnoringTimestamp(body, h))
	})
}

func mapStandardErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, standardwebhooks.ErrRequiredHeaders):
		return webhooks.ErrMissingHeader
	case errors.Is(err, standardwebhooks.ErrNoMatchingSignature):
		return webhooks.ErrNoValidSignature
	default:
		return webhooks.ErrBadHeader
	}
}

// StandardHeaders is the parsed shape of the three Standard Webhooks headers.
type StandardHeaders struct {
	ID         string
	Timestamp  time.Time
	Signatures int // count of "v1,<sig>" entries in webhook-signature
}

// ParseStandardHeaders reads and checks the three headers the way the library will (first value
// of each, space-separated signature list), so our timestamp check and its HMAC agree on the input.
func ParseStandardHeaders(h http.Header) (StandardHeaders, error) {
	var sh StandardHeaders
	sh.ID = h.Get(webhooks.StandardIDHeader)
	ts := h.Get(webhooks.StandardTimestampHeader)
	sig := h.Get(webhooks.StandardSignatureHeader)
	if sh.ID == "" || ts == "" || sig == "" {
		return sh, webhooks.ErrMissingHeader
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sh, fmt.Errorf("%w: %s is not an integer", webhooks.ErrBadHeader, webhooks.StandardTimestampHeader)
	}
	sh.Timestamp = time.Unix(sec, 0)
	for _, s := range strings.Split(sig, " ") {
		if version, val, ok := strings.Cut(s, ","); ok && version == "v1" && val != "" {
			sh.Signatures++
		}
	}
	return sh, nil
}
