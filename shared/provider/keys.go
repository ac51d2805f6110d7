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
	paymentKeyPrefix = "twice_pay_"
	attemptKeyPrefix = "twice_rec_"
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

func digest(parts ...string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}
