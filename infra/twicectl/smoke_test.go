package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSmokeAgainstTheLocalStack: `twicectl smoke` against the local stack (no payments token
// locally, the operator token for /ops) passes every check; with a wrong operator token it
// fails and exits 1, as it does when the provider times out (202); a payment method that is
// not a test token is refused before anything is sent.
func TestSmokeAgainstTheLocalStack(t *testing.T) {
	s := stack(t)
	t.Run("green", func(t *testing.T) {
		code, out, errOut := ctl(t, s, "smoke", "--wait", "30s")
		t.Log("\n" + out)
		for _, want := range []string{"ok   ops answers GET /ops/deadletters?limit=1 200", "ok   payment created pay_", " 201 succeeded",
			"ok   payment replayed pay_", "byte-identical, Idempotent-Replayed: true", "ok   provider mode: test",
			"ok   webhook delivered evt_", "smoke: all checks passed"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the output", want)
			}
		}
		if code != 0 || strings.Contains(out, "FAIL") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("a wrong operator token fails", func(t *testing.T) {
		code, out, _ := ctl(t, s, "smoke", "--token", "not-the-operator-token", "--wait", "1s")
		t.Log("\n" + out)
		if code != 1 || !strings.Contains(out, "FAIL ops answers: GET /ops/deadletters?limit=1 401") ||
			!strings.Contains(out, "ok   payment created") || !strings.Contains(out, "FAIL webhook delivered: not checked") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("a provider timeout is a 202 and a failed check", func(t *testing.T) {
		post(t, s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/payment_intents","fault":"timeout_after_effect","count":1}`)
		code, out, _ := ctl(t, s, "smoke", "--wait", "1s")
		t.Log("\n" + out)
		if code != 1 || !strings.Contains(out, "FAIL payment created: POST /payments key smoke-") || !strings.Contains(out, ": 202 pending") ||
			!strings.Contains(out, "run smoke again") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("a real payment method needs --allow-live", func(t *testing.T) {
		code, out, errOut := ctl(t, s, "smoke", "--payment-method", "pm_1QxRealCard")
		if code != 2 || out != "" || !strings.Contains(errOut, "--allow-live") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})
}

// fakeLive answers like a deployment whose Stripe key is live: the payment succeeds, and the
// provider's answer in the attempt log says livemode true.
func fakeLive(t *testing.T) *httptest.Server {
	const payment = `{"id":"pay_live","status":"succeeded","amount":100,"currency":"usd","provider_payment_id":"pi_live"}`
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/payments":
			b, _ := io.ReadAll(r.Body)
			k := r.Header.Get("Idempotency-Key") + string(b)
			if seen[k] {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			seen[k] = true
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, payment)
		case r.URL.Path == "/ops/deadletters":
			io.WriteString(w, `{"records":[]}`)
		case r.URL.Path == "/ops/attempts":
			io.WriteString(w, `{"attempts":[{"direction":"outbound","operation":"payment_intents.create","status":200,"livemode":true}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSmokeRefusesLiveMode: the provider's answers say livemode true: smoke fails (exit 1)
// unless told --allow-live.
func TestSmokeRefusesLiveMode(t *testing.T) {
	srv := fakeLive(t)
	for name, tc := range map[string]struct {
		args     []string
		code     int
		wantLine string
	}{
		"refused":      {nil, 1, "FAIL provider mode: live"},
		"--allow-live": {[]string{"--allow-live"}, 1, "ok   provider mode: live (--allow-live)"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"--url", srv.URL, "smoke", "--wait", "50ms"}, tc.args...)
			code := run(args, &out, &errOut, func(string) string { return "" })
			t.Log("\n" + out.String())
			// The fake never delivers a webhook: even allowed, the webhook check fails.
			if code != tc.code || !strings.Contains(out.String(), tc.wantLine) || !strings.Contains(out.String(), "FAIL webhook delivered") {
				t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
			}
		})
	}
}
