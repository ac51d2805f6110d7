package header

import (
	"net/http"
	"strings"
)

// Redacted is what replaces a sensitive header's value.
const Redacted = "[redacted]"

// names are the headers that carry a credential or a signature.
var names = []string{
	"Authorization",
	"Proxy-Authorization",
	"Cookie",
	"Set-Cookie",
	"Stripe-Signature",
	"Webhook-Signature",
	"X-Api-Key",
}

// Sensitive reports whether a header of this name carries a credential or a signature:
// Authorization, Proxy-Authorization, Cookie, Set-Cookie, Stripe-Signature, Webhook-Signature
// or X-Api-Key, in any spelling (a map built without canonical keys has "stripe-signature").
func Sensitive(name string) bool {
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// Mask returns a copy of h in which each sensitive header has the single value Redacted. The
// other headers keep their values as they are: Mask hides credentials, it does not redact
// text (redact.Header does both, and flattens).
func Mask(h http.Header) http.Header {
	c := h.Clone()
	if c == nil {
		c = http.Header{}
	}
	for k := range c {
		if Sensitive(k) {
			c[k] = []string{Redacted}
		}
	}
	return c
}
