package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/provider"
	"pgregory.net/rapid"
)

var keyShape = regexp.MustCompile(`^twice_(pay|rec|cap|cxl|ref|exp)_[0-9a-f]{64}$`)

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
		"capture is deterministic":                {provider.CaptureKey("local", "k1"), provider.CaptureKey("local", "k1"), true},
		"refund is deterministic":                 {provider.RefundKey("local", "k1"), provider.RefundKey("local", "k1"), true},
		"cancel is deterministic":                 {provider.CancelKey("local", "k1"), provider.CancelKey("local", "k1"), true},
		"auto cancel is deterministic":            {provider.AutoCancelKey("pay_1", "customer_window"), provider.AutoCancelKey("pay_1", "customer_window"), true},
		"one caller key, capture vs create":       {provider.CaptureKey("local", "k1"), provider.IdempotencyKey("local", "k1"), false},
		"one caller key, refund vs cancel":        {provider.RefundKey("local", "k1"), provider.CancelKey("local", "k1"), false},
		"second refund, new key":                  {provider.RefundKey("local", "k1"), provider.RefundKey("local", "k2"), false},
		"refund keys are scoped":                  {provider.RefundKey("alice", "k1"), provider.RefundKey("bob", "k1"), false},
		"auto cancel per reason":                  {provider.AutoCancelKey("pay_1", "customer_window"), provider.AutoCancelKey("pay_1", "authorization_expiry"), false},
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

func TestStateAndRefundSentinels(t *testing.T) {
	tests := map[string]struct {
		err               error
		unexpected, large bool
	}{
		"capture of a succeeded payment": {&provider.PermanentError{Op: "capture", StatusCode: 400, Code: "payment_intent_unexpected_state"}, true, false},
		"refund of an uncaptured one":    {&provider.PermanentError{Op: "refund", StatusCode: 400, Code: "charge_not_refundable"}, true, false},
		"refund over what remains":       {&provider.PermanentError{Op: "refund", StatusCode: 400, Code: "amount_too_large"}, false, true},
		"refund of a refunded charge":    {&provider.PermanentError{Op: "refund", StatusCode: 400, Code: "charge_already_refunded"}, false, true},
		// A create's amount over Stripe's limit is no refund question.
		"create amount too large": {&provider.PermanentError{Op: "create", StatusCode: 400, Code: "amount_too_large"}, false, false},
		"wrapped":                 {fmt.Errorf("x: %w", &provider.PermanentError{Op: "refund", Code: "amount_too_large"}), false, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if errors.Is(tc.err, provider.ErrUnexpectedState) != tc.unexpected || errors.Is(tc.err, provider.ErrRefundTooLarge) != tc.large {
				t.Fatalf("Is(ErrUnexpectedState)=%v Is(ErrRefundTooLarge)=%v", errors.Is(tc.err, provider.ErrUnexpectedState), errors.Is(tc.err, provider.ErrRefundTooLarge))
			}
		})
	}
}

// The client secret is a credential: no way of printing, logging or marshalling a Payment
// shows it; only Reveal does.
func TestClientSecretNeverPrints(t *testing.T) {
	const secret = "pi_3Mt_secret_YrKJUKribcBjcG8HVhfZ"
	p := provider.Payment{ID: "pi_3Mt", Status: provider.StatusRequiresAction, ClientSecret: secret,
		NextAction: &provider.NextAction{Type: "use_stripe_sdk"}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("payment", "payment", p, "secret", p.ClientSecret)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("payment", "payment", p, "secret", p.ClientSecret)
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{
		"%v": fmt.Sprintf("%v", p), "%+v": fmt.Sprintf("%+v", p), "%#v": fmt.Sprintf("%#v", p),
		"%s": fmt.Sprintf("%s", p.ClientSecret), "slog": logs.String(), "json": string(js),
		"error": (&provider.DeclineError{Payment: p}).Error(),
	}
	for name, out := range outs {
		if strings.Contains(out, "secret_YrKJ") {
			t.Errorf("%s shows the client secret: %s", name, out)
		}
	}
	if !strings.Contains(outs["%+v"], "[redacted]") {
		t.Errorf("%%+v = %s, want the field shown as [redacted]", outs["%+v"])
	}
	if p.ClientSecret.Reveal() != secret {
		t.Fatalf("Reveal = %q", p.ClientSecret.Reveal())
	}
	if provider.ClientSecret("").String() != "" {
		t.Fatal("an absent secret prints as something")
	}
}

func TestStatusFinal(t *testing.T) {
	tests := map[provider.Status]bool{
		provider.StatusRequiresAction: false, provider.StatusRequiresCapture: false, provider.StatusProcessing: false,
		provider.StatusSucceeded: true, provider.StatusDeclined: true, provider.StatusRefunded: true, provider.StatusCanceled: true,
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

// TestOrderTableMapsStatusesAndEvents: every payment status has the one event that reports it,
// and that event reports it back, except pending, which no event reports; a later status of
// the lifecycle ranks above an earlier one.
func TestOrderTableMapsStatusesAndEvents(t *testing.T) {
	order := []provider.Status{provider.StatusPending, provider.StatusRequiresAction, provider.StatusProcessing,
		provider.StatusDeclined, provider.StatusSucceeded, provider.StatusRefunded}
	for i, s := range order {
		ev := provider.StatusEvent(s)
		got, ok := provider.EventStatus(ev)
		if ev == "" || (s == provider.StatusPending) == ok || ok && got != s {
			t.Errorf("%s: event %q reports %q (%v)", s, ev, got, ok)
		}
		if i > 0 && provider.StatusRank(s) <= provider.StatusRank(order[i-1]) {
			t.Errorf("%s does not rank after %s", s, order[i-1])
		}
	}
}
