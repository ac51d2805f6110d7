package provider_test

import (
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/runtwice/twice/shared/provider"
	"pgregory.net/rapid"
)

var keyShape = regexp.MustCompile(`^twice_(pay|rec)_[0-9a-f]{64}$`)

func TestKeysAreDeterministicAndShaped(t *testing.T) {
	tests := map[string]struct {
		a, b string
		same bool
	}{
		"same inputs, same key":                   {provider.IdempotencyKey("local", "k1"), provider.IdempotencyKey("local", "k1"), true},
		"different key":                           {provider.IdempotencyKey("local", "k1"), provider.IdempotencyKey("local", "k2"), false},
		"different scope":                         {provider.IdempotencyKey("alice", "k1"), provider.IdempotencyKey("bob", "k1"), false},
		"NUL cannot shift the boundary":           {provider.IdempotencyKey("a\x00b", "c"), provider.IdempotencyKey("a", "b\x00c"), false},
		"concatenation cannot shift the boundary": {provider.IdempotencyKey("ab", "c"), provider.IdempotencyKey("a", "bc"), false},
		"attempt is deterministic":                {provider.AttemptKey("in_1", 2), provider.AttemptKey("in_1", 2), true},
		"next attempt, new key":                   {provider.AttemptKey("in_1", 2), provider.AttemptKey("in_1", 3), false},
		"attempt and payment keys differ":         {provider.AttemptKey("in_1", 2), provider.IdempotencyKey("in_1", "2"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if (tc.a == tc.b) != tc.same {
				t.Fatalf("%q vs %q: same=%v, want %v", tc.a, tc.b, tc.a == tc.b, tc.same)
			}
			for _, k := range []string{tc.a, tc.b} {
				if !keyShape.MatchString(k) || len(k) > 255 {
					t.Fatalf("key %q has the wrong shape", k)
				}
			}
		})
	}
}

func TestKeysInjectiveProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s1, k1 := rapid.String().Draw(t, "s1"), rapid.String().Draw(t, "k1")
		s2, k2 := rapid.String().Draw(t, "s2"), rapid.String().Draw(t, "k2")
		if (s1 == s2 && k1 == k2) != (provider.IdempotencyKey(s1, k1) == provider.IdempotencyKey(s2, k2)) {
			t.Fatalf("(%q,%q) vs (%q,%q)", s1, k1, s2, k2)
		}
	})
}

func TestPermanentErrorSentinels(t *testing.T) {
	tests := map[string]struct {
		err                  error
		notFound, idemptency bool
	}{
		"404":               {&provider.PermanentError{StatusCode: 404, Code: "resource_missing"}, true, false},
		"idempotency_error": {&provider.PermanentError{StatusCode: 400, Code: "idempotency_error"}, false, true},
		"other 400":         {&provider.PermanentError{StatusCode: 400, Code: "parameter_missing"}, false, false},
		"wrapped 404":       {fmt.Errorf("get: %w", &provider.PermanentError{StatusCode: 404}), true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if errors.Is(tc.err, provider.ErrNotFound) != tc.notFound || errors.Is(tc.err, provider.ErrIdempotencyMismatch) != tc.idemptency {
				t.Fatalf("Is(ErrNotFound)=%v Is(ErrIdempotencyMismatch)=%v", errors.Is(tc.err, provider.ErrNotFound), errors.Is(tc.err, provider.ErrIdempotencyMismatch))
			}
		})
	}
}

func TestStatusFinal(t *testing.T) {
	tests := map[provider.Status]bool{
		provider.StatusPending: false, provider.StatusProcessing: false, provider.StatusSucceeded: true,
		provider.StatusDeclined: true, provider.StatusRefunded: true, provider.StatusCanceled: true,
	}
	for s, want := range tests {
		if s.Final() != want {
			t.Errorf("%s.Final() = %v, want %v", s, s.Final(), want)
		}
	}
}

func ExampleIdempotencyKey() {
	// The same caller key always maps to the same provider key, so a retry after a crash
	// cannot create a second charge.
	first := provider.IdempotencyKey("local", "order-42")
	again := provider.IdempotencyKey("local", "order-42")
	fmt.Println(first == again, len(first), first[:10])
	// Output: true 74 twice_pay_
}

func ExampleAttemptKey() {
	fmt.Println(provider.AttemptKey("in_1", 1) == provider.AttemptKey("in_1", 1))
	fmt.Println(provider.AttemptKey("in_1", 1) == provider.AttemptKey("in_1", 2))
	// Output:
	// true
	// false
}
