package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
)

// MaxKeyLen is the longest key accepted, as Stripe and the IETF draft allow.
const MaxKeyLen = 255

// Sentinel errors for keys.
var (
	ErrKeyMissing = errors.New("idempotency: key missing")
	ErrKeyInvalid = errors.New("idempotency: key must be 1-255 visible ASCII characters")
)

// ValidateKey accepts 1 to 255 visible ASCII characters (0x21-0x7E): no spaces, no control
// characters, nothing a log line or a header could mangle.
func ValidateKey(key string) error {
	if key == "" {
		return ErrKeyMissing
	}
	if len(key) > MaxKeyLen {
		return ErrKeyInvalid
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return ErrKeyInvalid
		}
	}
	return nil
}

// Scoped joins a caller scope and a key into the record's partition key. The scope is escaped so
// that no (scope, key) pair can collide with another: "a#b"+"c" never meets "a"+"b#c".
func Scoped(scope, key string) string {
	return "k#" + url.QueryEscape(scope) + "#" + key
}

// Derive returns a deterministic identifier for (scope, key) and a purpose, such as the id of
// the effect a request creates or the key passed on to a provider. The same request derives the
// same id on every retry, forever; nothing random or time-based goes in.
func Derive(purpose, scope, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", purpose, scope, key)
	return hex.EncodeToString(h.Sum(nil))
}
