package webhooks

import "errors"

// Sentinel errors a caller can branch on with errors.Is. The ingest handler answers all of the
// verification errors with one generic 400: telling a forger which check failed helps only the forger.
var (
	// ErrMissingHeader: a header the scheme requires is absent or empty.
	ErrMissingHeader = errors.New("webhooks: missing signature header")
	// ErrBadHeader: a signature header is present but malformed (no timestamp, not a number, ...).
	ErrBadHeader = errors.New("webhooks: malformed signature header")
	// ErrNoValidSignature: no signature in the header matches any active secret.
	ErrNoValidSignature = errors.New("webhooks: no valid signature")
	// ErrTooOld: the signed timestamp is older than the tolerance (a replay or a long delay).
	ErrTooOld = errors.New("webhooks: timestamp too old")
	// ErrTooNew: the signed timestamp is further in the future than the tolerance.
	ErrTooNew = errors.New("webhooks: timestamp too far in the future")
	// ErrUnknownProvider: no verifier is configured under that provider name.
	ErrUnknownProvider = errors.New("webhooks: unknown provider")
	// ErrTooLarge: the body is over the accepted size.
	ErrTooLarge = errors.New("webhooks: body too large")
	// ErrNoSecret: a verifier was built with no usable secret.
	ErrNoSecret = errors.New("webhooks: no secret")
	// ErrBadSecret: a secret is not in the form the scheme needs (e.g. whsec_ not base64).
	ErrBadSecret = errors.New("webhooks: malformed secret")
	// ErrBadPayload: a verified body could not be decoded as the provider's event.
	ErrBadPayload = errors.New("webhooks: undecodable event payload")
)
