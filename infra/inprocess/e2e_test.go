package inprocess

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
)

// newStack starts a stack on free loopback ports over a fresh data directory.
// testClockStart is where every stack of these tests starts its clock unless the test picks
// another start, so that no outcome depends on the day the tests run.
var testClockStart = time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC)

func newStack(t *testing.T, cfg Config) *Stack {
	t.Helper()
	cfg.Addr, cfg.SimAddr = "127.0.0.1:0", "127.0.0.1:0"
	if cfg.ClockStart.IsZero() {
		cfg.ClockStart = testClockStart
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
		// TWICE_TEST_STACK_LOG=DIR keeps each test stack's log there, for a failure to explain.
		if dir := os.Getenv("TWICE_TEST_STACK_LOG"); dir != "" {
			f, err := os.Create(filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+".log"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			cfg.Log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Close() })
	return s
}

type answer struct {
	status int
	header http.Header
	body   string
}

// send makes one request with header and reads the whole answer.
func send(t testing.TB, method, url, body string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// call calls the payments API, with an Idempotency-Key when key is set.
func call(t testing.TB, method, url, key, body string) answer {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return send(t, method, url, body, h)
}

// ops calls the operator API with the operator token.
func ops(t testing.TB, s *Stack, method, path, body string) answer {
	t.Helper()
	return send(t, method, s.APIURL()+path, body,
		http.Header{"Authorization": {"Bearer " + s.Config().OperatorToken}, "Content-Type": {"application/json"}})
}

func paymentBody(pm string) string {
	return fmt.Sprintf(`{"amount":2500,"currency":"usd","customer":"cus_e2e","payment_method":%q}`, pm)
}

func simStats(t testing.TB, s *Stack) map[string]any {
	t.Helper()
	a := call(t, "GET", s.SimURL()+"/_sim/stats", "", "")
	var m map[string]any
	if err := json.Unmarshal([]byte(a.body), &m); err != nil {
		t.Fatalf("stats %q: %v", a.body, err)
	}
	return m
}

// eventually polls check until it holds, for work the stack finishes in the background; it is
// bounded so a bug fails instead of hanging.
func eventually(t testing.TB, within time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFiftyConcurrentPOSTsOneCharge(t *testing.T) {
	s := newStack(t, Config{})
	var wg sync.WaitGroup
	answers := make([]answer, 50)
	for i := range answers {
		wg.Go(func() { answers[i] = call(t, "POST", s.APIURL()+"/payments", "same-key", paymentBody("pm_card_visa")) })
	}
	wg.Wait()
	var created string
	for i, a := range answers {
		switch a.status {
		case http.StatusCreated:
			if created == "" {
				created = a.body
			}
			if a.body != created {
				t.Fatalf("answer %d: a different 201 body:\n%s\n%s", i, a.body, created)
			}
		case http.StatusConflict:
			if a.header.Get("Retry-After") == "" {
				t.Fatalf("answer %d: 409 without Retry-After", i)
			}
		default:
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	if created == "" {
		t.Fatal("no 201 among the answers")
	}
	if n := simStats(t, s)["payment_intents"]; n != float64(1) {
		t.Fatalf("the simulator holds %v PaymentIntents, want 1", n)
	}
}

func TestEveryTestCardGivesItsDecline(t *testing.T) {
	s := newStack(t, Config{})
	cases := []struct{ pm, code, class string }{
		{"pm_card_visa_chargeDeclined", "generic_decline", "generic"},
		{"pm_card_visa_chargeDeclinedInsufficientFunds", "insufficient_funds", "limit"},
		{"pm_card_visa_chargeDeclinedLostCard", "lost_card", "hard"},
		{"pm_card_visa_chargeDeclinedStolenCard", "stolen_card", "hard"},
		{"pm_card_visa_chargeDeclinedVelocityLimitExceeded", "card_velocity_exceeded", "limit"},
		{"pm_card_chargeDeclinedExpiredCard", "expired_card", "data"},
		{"pm_card_chargeDeclinedIncorrectCvc", "incorrect_cvc", "data"},
		{"pm_card_chargeDeclinedProcessingError", "processing_error", "technical"},
	}
	for _, tc := range cases {
		t.Run(tc.pm, func(t *testing.T) {
			first := call(t, "POST", s.APIURL()+"/payments", "card-"+tc.pm, paymentBody(tc.pm))
			var v payments.View
			if err := json.Unmarshal([]byte(first.body), &v); err != nil || first.status != http.StatusPaymentRequired {
				t.Fatalf("%d %s", first.status, first.body)
			}
			if v.Status != "declined" || deref(v.DeclineCode) != tc.code || deref(v.DeclineClass) != tc.class {
				t.Fatalf("got status %s code %s class %s", v.Status, deref(v.DeclineCode), deref(v.DeclineClass))
			}
			again := call(t, "POST", s.APIURL()+"/payments", "card-"+tc.pm, paymentBody(tc.pm))
			if again.status != first.status || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %s", again.status, again.body)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func armFault(t testing.TB, simURL, fault string, count int) {
	t.Helper()
	a := call(t, "POST", simURL+"/_sim/faults", "", fmt.Sprintf(`{"path_prefix":"/v1/payment_intents","fault":%q,"count":%d,"retry_after_s":1}`, fault, count))
	if a.status != http.StatusCreated {
		t.Fatalf("arm %s: %d %s", fault, a.status, a.body)
	}
}

func TestTimeoutAfterEffectResolvesInBackground(t *testing.T) {
	s := newStack(t, Config{ProviderTimeout: 300 * time.Millisecond, ResolveDelay: 50 * time.Millisecond})
	armFault(t, s.SimURL(), "timeout_after_effect", 1)
	first := call(t, "POST", s.APIURL()+"/payments", "slow-1", paymentBody("pm_card_visa"))
	var v payments.View
	if err := json.Unmarshal([]byte(first.body), &v); err != nil || first.status != http.StatusAccepted || v.Status != "pending" {
		t.Fatalf("first answer %d %s", first.status, first.body)
	}
	eventually(t, 20*time.Second, "the pending payment resolves", func() bool {
		return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
	})
	// The client's retry either replays what the background resolver stored or, if it comes
	// first, resolves it itself with the same provider key; from then on it replays.
	again := call(t, "POST", s.APIURL()+"/payments", "slow-1", paymentBody("pm_card_visa"))
	if again.status != http.StatusCreated || !strings.Contains(again.body, v.ID) || !strings.Contains(again.body, `"succeeded"`) {
		t.Fatalf("retry after resolution: %d %v %s", again.status, again.header, again.body)
	}
	third := call(t, "POST", s.APIURL()+"/payments", "slow-1", paymentBody("pm_card_visa"))
	if third.body != again.body || third.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not replayed: %v %s", third.header, third.body)
	}
	if n := simStats(t, s)["payment_intents"]; n != float64(1) {
		t.Fatalf("the simulator holds %v PaymentIntents, want 1", n)
	}
}

func TestServerErrorsAndThrottling(t *testing.T) {
	s := newStack(t, Config{ProviderTimeout: time.Second, ResolveDelay: 50 * time.Millisecond})
	// A 500 on a create may have been applied: unknown outcome, pending, resolved later.
	armFault(t, s.SimURL(), "http_500", 1)
	a := call(t, "POST", s.APIURL()+"/payments", "five-hundred", paymentBody("pm_card_visa"))
	if a.status != http.StatusAccepted {
		t.Fatalf("after a 500: %d %s", a.status, a.body)
	}
	// A 429 with Retry-After 1 s is waited out inline by the retry policy.
	armFault(t, s.SimURL(), "http_429", 1)
	b := call(t, "POST", s.APIURL()+"/payments", "throttled", paymentBody("pm_card_visa"))
	if b.status != http.StatusCreated {
		t.Fatalf("after a 429: %d %s", b.status, b.body)
	}
}

func TestWebhooksMoveThePayment(t *testing.T) {
	s := newStack(t, Config{})
	a := call(t, "POST", s.APIURL()+"/payments", "hook-1", paymentBody("pm_card_visa"))
	var v payments.View
	json.Unmarshal([]byte(a.body), &v)
	// A refund at the provider reaches us only as a webhook.
	if a := stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+deref(v.ProviderPaymentID)); a.status != 200 {
		t.Fatalf("refund: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the refund webhook is applied", func() bool {
		return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"refunded"`)
	})
}
