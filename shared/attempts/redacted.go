package attempts

import (
	"strings"

	"github.com/runtwice/twice/shared/redact"
)

// Caps on the parts of an attempt that are not bodies or headers (redact caps those).
const (
	maxErr = 1024
	// maxKey caps a lookup key or a short field (an Idempotency-Key is at most 255).
	maxKey    = 255
	maxClaims = 4
)

// lookupValue is a lookup key as the attempt shows it: redacted, control characters
// replaced, then capped. (It is filed under indexPK of its exact value.)
func lookupValue(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, redact.Text(v))
	v, _ = redact.Cap(v, maxKey)
	return v
}

// Redacted returns a with every stored field redacted and each body capped at bodyCap bytes
// (marking RequestTruncated / ResponseTruncated). Redaction runs before the cap, so a cut never
// leaves half a secret behind. It is idempotent: redacting twice changes nothing more.
func (a Attempt) Redacted(bodyCap int) Attempt {
	a.RequestHeader = redact.HeaderMap(a.RequestHeader)
	a.ResponseHeader = redact.HeaderMap(a.ResponseHeader)
	a.Path = redact.Path(a.Path)
	a.Err, _ = redact.Cap(redact.Text(a.Err), maxErr)
	// Every other field can come from outside too (a claimed id, a caller's key, a header):
	// redacted and capped like the rest.
	for _, f := range []*string{&a.IdempotencyKey, &a.PaymentID, &a.EventID, &a.ProviderPaymentID, &a.Invoice,
		&a.CorrelationID, &a.Scope, &a.Source, &a.Operation, &a.Provider, &a.Method, &a.Result, &a.BodySHA256,
		&a.CardBrand, &a.CardLast4} {
		*f = lookupValue(*f)
	}
	if len(a.Claimed) > maxClaims {
		a.Claimed = a.Claimed[:maxClaims]
	}
	if a.Claimed != nil {
		claimed := make([]string, len(a.Claimed))
		for i, c := range a.Claimed {
			claimed[i] = redact.CapLog(redact.Text(c))
		}
		a.Claimed = claimed
	}
	var cut bool
	if a.RequestBytes == 0 {
		a.RequestBytes = len(a.RequestBody)
	}
	a.RequestBody, cut = redact.Cap(redact.Body(a.RequestHeader["Content-Type"], []byte(a.RequestBody)), bodyCap)
	a.RequestTruncated = a.RequestTruncated || cut
	if a.ResponseBytes == 0 {
		a.ResponseBytes = len(a.ResponseBody)
	}
	a.ResponseBody, cut = redact.Cap(redact.Body(a.ResponseHeader["Content-Type"], []byte(a.ResponseBody)), bodyCap)
	a.ResponseTruncated = a.ResponseTruncated || cut
	return a
}
