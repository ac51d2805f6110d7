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

// Signature headers. They are the providers' wire names, here so that a delivery is built and
// logged without linking the signature libraries (package signature checks them against
// stripe-go's and the Standard Webhooks library's).
const (
	// StripeSignatureHeader carries "t=<unix seconds>,v1=<hex hmac>[,v1=...]".
	StripeSignatureHeader = "Stripe-Signature"
	// Standard Webhooks headers (https://www.standardwebhooks.com).
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// DefaultTolerance is how far a signed timestamp may be from our clock, in either direction.
const DefaultTolerance = 300 * time.Second

// Verifier checks that a delivery was signed by the provider, recently.
// It returns nil or an error wrapping one of the sentinels (ErrMissingHeader, ErrBadHeader,
// ErrNoValidSignature, ErrTooOld, ErrTooNew). Errors never carry a secret or a signature.
type Verifier interface {
	Verify(header http.Header, body []byte) error
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
