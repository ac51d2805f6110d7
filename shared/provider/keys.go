package provider

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Prefixes of the provider idempotency keys, so a key seen in the provider's dashboard or the
// attempt log says where it came from.
const (
	paymentKeyPrefix    = "twice_pay_"
	attemptKeyPrefix    = "twice_rec_"
	captureKeyPrefix    = "twice_cap_"
	cancelKeyPrefix     = "twice_cxl_"
	refundKeyPrefix     = "twice_ref_"
	autoCancelKeyPrefix = "twice_exp_"
)

// IdempotencyKey derives the provider idempotency key for our (scope, key) pair: the prefix
// "twice_pay_" and the hex SHA-256 of the length-prefixed scope and key (74 characters, well
// under Stripe's 255).
//
// It is a pure function of its arguments: never random, never time-based, so a retry after a
// crash sends the same key and the provider returns the first outcome instead of charging again.
// Hashing keeps the caller's key and principal out of the provider's records, and the length
// prefix makes the encoding injective (scope "a\x00b", key "c" differs from scope "a", key "b\x00c").
func IdempotencyKey(scope, key string) string {
	return paymentKeyPrefix + digest(scope, key)
}

// AttemptKey derives the provider idempotency key of recovery attempt number attempt of invoice:
// "twice_rec_" and a hex SHA-256 as in IdempotencyKey. Repeating an attempt (a Lambda retry, a
// resumed state machine) reuses the key; the next attempt number gets a new one.
func AttemptKey(invoice string, attempt int) string {
	return attemptKeyPrefix + digest(invoice, strconv.Itoa(attempt))
}

// CaptureKey derives the provider idempotency key of a capture the caller asked for with key
// (POST /payments/{id}/capture with an Idempotency-Key): "twice_cap_" and a hex SHA-256 of the
// length-prefixed scope and key, as in IdempotencyKey. The prefix keeps it apart from the
// caller's create, cancel and refund keys even when the caller reuses one key string for each:
// Stripe keys are per account, not per endpoint, and a key sent to a second endpoint is an
// idempotency_error.
func CaptureKey(scope, key string) string {
	return captureKeyPrefix + digest(scope, key)
}

// CancelKey derives the provider idempotency key of a cancel the caller asked for with key:
// "twice_cxl_" and the digest of (scope, key).
func CancelKey(scope, key string) string {
	return cancelKeyPrefix + digest(scope, key)
}

// RefundKey derives the provider idempotency key of a refund the caller asked for with key:
// "twice_ref_" and the digest of (scope, key). One caller key is one provider refund, however
// often it is repeated; a second refund needs a second key.
func RefundKey(scope, key string) string {
	return refundKeyPrefix + digest(scope, key)
}

// AutoCancelKey derives the provider idempotency key of a cancel that twice decides on its own
// (no caller key): a payment left in requires_action past the customer's window, or an
// authorization about to lapse. It is "twice_exp_" and the digest of (our payment id, reason),
// so every run of the timer that cancels one payment for one reason sends the same key.
func AutoCancelKey(paymentID, reason string) string {
	return autoCancelKeyPrefix + digest(paymentID, reason)
}

func digest(parts ...string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}
