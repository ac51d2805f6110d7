package idempotency

import (
	"fmt"
	"net/http"
)

// Header names of the IETF Idempotency-Key draft and of Stripe's replay marker.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// KeyCountError is a request with more than one Idempotency-Key header. Which one would count
// is a guess, so it is refused rather than the first used silently; errors.Is(err,
// ErrKeyInvalid) is true.
type KeyCountError struct {
	N int
}

func (e *KeyCountError) Error() string {
	return fmt.Sprintf("idempotency: %d %s headers", e.N, HeaderKey)
}

// Is makes errors.Is(err, ErrKeyInvalid) true.
func (e *KeyCountError) Is(target error) bool { return target == ErrKeyInvalid }

// KeyOf returns the Idempotency-Key of a request's headers: ErrKeyMissing without one,
// ErrKeyInvalid when it is not 1-255 visible ASCII characters, a *KeyCountError when there is
// more than one. It answers nothing: the caller's handler maps the error to its answer.
func KeyOf(h http.Header) (string, error) {
	if n := len(h.Values(HeaderKey)); n > 1 {
		return "", &KeyCountError{N: n}
	}
	key := h.Get(HeaderKey)
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
}
