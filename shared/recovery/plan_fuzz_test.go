package recovery

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzNextAttemptJSON decodes a state machine input as the task handler does and plans from
// it: whatever arrives, planning must not panic, and a retry must be in the future, inside the
// window and Wait-ready.
func FuzzNextAttemptJSON(f *testing.F) {
	f.Add([]byte(`{"classification":{"decline_class":"limit","retryable":true,"action":"retry_when_funded","network":"visa","reason":"insufficient funds","explanation":"The card issuer declined: insufficient funds."},"attempts":[{"at":"2026-11-29T08:00:00Z","outcome":"declined","decline_class":"limit"}]}`))
	f.Add([]byte(`{"classification":{"decline_class":"generic","retryable":true,"action":"retry_after","delay_seconds":9223372036854775807,"network":"mastercard"},"attempts":[{"at":"2026-11-29T08:00:00Z","outcome":"declined","retry_after_seconds":-5}]}`))
	f.Add([]byte(`{"classification":{"decline_class":"technical","retryable":true,"action":"retry_backoff"},"attempts":[{"at":"0001-01-01T00:00:00Z"},{"at":"9999-12-31T23:59:59Z"}],"anchor_day":99}`))
	f.Add([]byte(`{"classification":{"decline_class":"hard","action":"stop"},"attempts":[]}`))
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		var in Input
		if json.Unmarshal(data, &in) != nil {
			return
		}
		plan, err := NextAttempt(DefaultPolicy(), in, now, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			return
		}
		if plan.Retry {
			if plan.At.Before(now) || plan.At.After(in.Charges[0].At.Add(DefaultPolicy().Window)) || plan.At.Nanosecond() != 0 {
				t.Fatalf("retry at %s (now %s, first %s)", plan.At, now, in.Charges[0].At)
			}
			if !in.Classification.Retryable || !in.Classification.Class.MayRetry() {
				t.Fatalf("retried a non-retryable classification")
			}
		}
		if _, err := json.Marshal(plan); err != nil {
			t.Fatalf("plan does not marshal: %v", err)
		}
	})
}
