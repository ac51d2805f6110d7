package inprocess

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/retry"
)

// armThrottle makes the simulator answer the next count PaymentIntent calls with Stripe's 429
// (its rate_limit error body and Retry-After header).
func armThrottle(t *testing.T, s *Stack, count, retryAfter int) {
	t.Helper()
	a := call(t, "POST", s.SimURL()+"/_sim/faults", "", fmt.Sprintf(
		`{"path_prefix":"/v1/payment_intents","fault":"http_429","count":%d,"retry_after_s":%d}`, count, retryAfter))
	if a.status != http.StatusCreated {
		t.Fatalf("arm http_429: %d %s", a.status, a.body)
	}
}

// TestProviderThrottledPayment: Stripe answering 429 to POST /payments. While it keeps
// throttling, the retry policy makes its bounded attempts, waiting the Retry-After between
// them, and the answer is 503 provider-busy with Retry-After; nothing is charged and the key is
// free, so the caller's retry with the same key is charged once. With a Retry-After that would
// end past the request's deadline, no retry starts: one attempt and the 503 at once.
func TestProviderThrottledPayment(t *testing.T) {
	t.Run("throttled past the attempts", func(t *testing.T) {
		s := newStack(t, Config{})
		armThrottle(t, s, 10, 1)
		a := call(t, "POST", s.APIURL()+"/payments", "throttled-long", paymentBody("pm_card_visa"))
		if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "provider-busy") || a.header.Get("Retry-After") == "" {
			t.Fatalf("while throttled: %d %v %s; want 503 provider-busy with Retry-After", a.status, a.header, a.body)
		}
		st := simStats(t, s)
		if st["faults_injected"] != float64(retry.DefaultMaxAttempts) || st["payment_intents"] != float64(0) {
			t.Fatalf("simulator: %v 429s, %v PaymentIntents; want %d and 0", st["faults_injected"], st["payment_intents"], retry.DefaultMaxAttempts)
		}
		if a := call(t, "DELETE", s.SimURL()+"/_sim/faults", "", ""); a.status >= 300 {
			t.Fatalf("clear faults: %d %s", a.status, a.body)
		}
		again := call(t, "POST", s.APIURL()+"/payments", "throttled-long", paymentBody("pm_card_visa"))
		if again.status != http.StatusCreated {
			t.Fatalf("retry with the same key: %d %s; want 201", again.status, again.body)
		}
		if replay := call(t, "POST", s.APIURL()+"/payments", "throttled-long", paymentBody("pm_card_visa")); replay.body != again.body {
			t.Fatalf("replay %d %s differs from %s", replay.status, replay.body, again.body)
		}
		if n := simStats(t, s)["payment_intents"]; n != float64(1) {
			t.Fatalf("%v PaymentIntents at the simulator, want 1", n)
		}
	})
	t.Run("retry-after past the deadline", func(t *testing.T) {
		s := newStack(t, Config{RequestTimeout: 2 * time.Second})
		armThrottle(t, s, 10, 3)
		a := call(t, "POST", s.APIURL()+"/payments", "throttled-deadline", paymentBody("pm_card_visa"))
		if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "provider-busy") {
			t.Fatalf("%d %s; want 503 provider-busy", a.status, a.body)
		}
		if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 1 {
			t.Fatalf("Retry-After %q", a.header.Get("Retry-After"))
		}
		// No 3 s wait was started against the 2 s deadline.
		if n := simStats(t, s)["faults_injected"]; n != float64(1) {
			t.Fatalf("%v attempts at the simulator, want 1", n)
		}
	})
}

// TestThrottledStack: with a fifth of its store, queue, runner, feed and provider calls refused
// as throttled (Config.Throttle), a client that retries what it is told to retry (503 with
// Retry-After, 409 while a key is in progress, a 500) gets every payment made, each charged once.
func TestThrottledStack(t *testing.T) {
	s := newStack(t, Config{Throttle: 0.2, RequestTimeout: time.Second, LockMargin: 100 * time.Millisecond})
	const n = 12
	for i := range n {
		key := fmt.Sprintf("throttled-stack-%d", i)
		eventually(t, 60*time.Second, "payment "+key+" is made", func() bool {
			a := call(t, "POST", s.APIURL()+"/payments", key, paymentBody("pm_card_visa"))
			switch a.status {
			case http.StatusCreated:
				return true
			case http.StatusServiceUnavailable, http.StatusConflict, http.StatusInternalServerError, http.StatusAccepted:
				return false
			}
			t.Fatalf("%s: %d %s", key, a.status, a.body)
			return false
		})
	}
	if got := simStats(t, s)["payment_intents"]; got != float64(n) {
		t.Fatalf("%v PaymentIntents at the simulator for %d payments", got, n)
	}
}
