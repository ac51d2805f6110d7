package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/inprocess"
)

// stack starts the local stack on free ports at a fixed clock start.
func stack(t *testing.T) *inprocess.Stack {
	t.Helper()
	s, err := inprocess.New(inprocess.Config{Addr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", DataDir: t.TempDir(),
		ClockStart: time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC), ProviderTimeout: 300 * time.Millisecond,
		ResolveDelay: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Close() })
	return s
}

func ctl(t *testing.T, s *inprocess.Stack, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "TWICE_URL" {
			return s.APIURL()
		}
		return ""
	}
	code := run(args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

func post(t *testing.T, url, key, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return v
}

func TestAgainstTheLocalStack(t *testing.T) {
	s := stack(t)
	post(t, s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/payment_intents","fault":"timeout_after_effect","count":1}`)
	pay := post(t, s.APIURL()+"/payments", "order-1003", `{"amount":2000,"currency":"usd","customer":"cus_123","payment_method":"pm_card_visa"}`)
	id, _ := pay["id"].(string)
	lost := post(t, s.APIURL()+"/payments", "order-lost", `{"amount":4250,"currency":"eur","customer":"cus_ada","payment_method":"pm_card_visa_chargeDeclinedLostCard"}`)
	lostID, _ := lost["id"].(string)
	funds := post(t, s.APIURL()+"/payments", "order-funds", `{"amount":1250,"currency":"usd","customer":"cus_bo","payment_method":"pm_card_visa_chargeDeclinedInsufficientFunds"}`)
	fundsID, _ := funds["id"].(string)
	if id == "" || lostID == "" || fundsID == "" {
		t.Fatalf("payments: %v %v %v", pay, lost, funds)
	}

	t.Run("attempts by the caller's key", func(t *testing.T) {
		code, out, errOut := ctl(t, s, "attempts", "order-1003")
		if code != 0 || !strings.Contains(out, "is payment "+id) || !strings.Contains(out, "payment_intents.create") ||
			!strings.Contains(out, "timeout") || !strings.Contains(out, "OUTCOME") {
			t.Errorf("exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("attempts --json by payment id", func(t *testing.T) {
		code, out, _ := ctl(t, s, "attempts", id, "--json")
		var v struct {
			Attempts []struct{ Outcome string }
		}
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Attempts) == 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		timedOut := false
		for _, a := range v.Attempts {
			timedOut = timedOut || a.Outcome == "timeout"
		}
		if !timedOut {
			t.Errorf("no timed-out attempt: %s", out)
		}
	})
	t.Run("timeline", func(t *testing.T) {
		code, out, errOut := ctl(t, s, "timeline", lostID)
		t.Log("\n" + out)
		if code != 0 || !strings.Contains(out, "42.50 EUR") || !strings.Contains(out, "API payments.create") || !strings.Contains(out, "402") {
			t.Errorf("exit %d\n%s%s", code, out, errOut)
		}
	})
	var dl string
	t.Run("deadletters ls", func(t *testing.T) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, out, _ := ctl(t, s, "--json", "deadletters", "ls", "--status", "open")
			var v struct {
				Records []struct {
					ID        string
					PaymentID string `json:"payment_id"`
				}
			}
			if code == 0 && json.Unmarshal([]byte(out), &v) == nil {
				for _, r := range v.Records {
					if r.PaymentID == lostID {
						dl = r.ID
					}
				}
			}
			if dl != "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the recovery files the record in the background
		}
		code, out, _ := ctl(t, s, "deadletters", "ls", "--status", "open", "--source", "recovery")
		t.Log("\n" + out)
		if dl == "" || code != 0 || !strings.Contains(out, dl) || !strings.Contains(out, "42.50 EUR") || !strings.Contains(out, "visa 9987") {
			t.Fatalf("exit %d, record %q\n%s", code, dl, out)
		}
	})
	t.Run("recoveries ls", func(t *testing.T) {
		// The soft decline's recovery is planned days ahead: it is running until then.
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, out, _ := ctl(t, s, "recoveries", "ls", "--json")
			var v struct {
				Recoveries []struct {
					PaymentID string `json:"payment_id"`
				}
			}
			if code == 0 && json.Unmarshal([]byte(out), &v) == nil && len(v.Recoveries) > 0 {
				if v.Recoveries[0].PaymentID != fundsID {
					t.Fatalf("--json: %s, want %s", out, fundsID)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no running recovery listed: exit %d %s", code, out)
			}
			time.Sleep(50 * time.Millisecond) // the decline starts its recovery through the outbox
		}
		code, out, errOut := ctl(t, s, "recoveries", "ls")
		t.Log("\n" + out)
		if code != 0 || !strings.Contains(out, "PAYMENT") || !strings.Contains(out, fundsID) || !strings.Contains(out, "12.50 USD") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("deadletters resolve", func(t *testing.T) {
		code, out, errOut := ctl(t, s, "deadletters", "resolve", dl, "--note", "customer paid by bank transfer", "--as", "ana")
		if code != 0 || !strings.Contains(out, "marked resolved (status resolved)") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		// The audit trail names the person --as gave.
		req, _ := http.NewRequest("GET", s.APIURL()+"/ops/deadletters/"+dl+"/audit", nil)
		req.Header.Set("Authorization", "Bearer twice-local-operator-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"actor":"operator:ana","action":"resolve"`) {
			t.Fatalf("audit: %s", b)
		}
		code, _, errOut = ctl(t, s, "deadletters", "ignore", dl)
		if code != 1 || !strings.Contains(errOut, "409") {
			t.Errorf("ignoring a resolved record: exit %d %s", code, errOut)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if code, _, errOut := ctl(t, s, "--token", "wrong", "attempts", "x"); code != 1 || !strings.Contains(errOut, "401") {
			t.Errorf("bad token: exit %d %s", code, errOut)
		}
		if code, _, _ := ctl(t, s, "deadletters", "frobnicate", "x"); code != 2 {
			t.Errorf("unknown command: exit %d", code)
		}
		if code, _, _ := ctl(t, s, "attempts", "x", "--bogus", "1"); code != 2 {
			t.Errorf("unknown flag: exit %d", code)
		}
	})
}

// TestRetrySaysQueued: a retry the API accepted is only queued (an outbox message the relay
// sends), and the CLI says so; resolve and ignore are done when the API answers. --as names
// the person in the operator header.
func TestRetrySaysQueued(t *testing.T) {
	var as []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as = append(as, r.Header.Get("Twice-Operator"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/retry") && strings.Contains(r.URL.Path, "dl_again"):
			io.WriteString(w, `{"retried":false,"record":{"id":"dl_again","status":"retrying"}}`)
		case strings.HasSuffix(r.URL.Path, "/retry"):
			io.WriteString(w, `{"retried":true,"record":{"id":"dl_1","status":"retrying"}}`)
		default:
			io.WriteString(w, `{"id":"dl_1","status":"ignored"}`)
		}
	}))
	defer srv.Close()
	env := func(k string) string {
		if k == "TWICE_URL" {
			return srv.URL
		}
		return ""
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"retry":       {[]string{"deadletters", "retry", "dl_1", "--as", "ana"}, "dl_1: retry queued; the record closes when the work is done (status retrying)\n"},
		"retry again": {[]string{"deadletters", "retry", "dl_again"}, "dl_again: a retry is already in progress; nothing more was sent (status retrying)\n"},
		"ignore":      {[]string{"deadletters", "ignore", "dl_1"}, "dl_1: marked ignored (status ignored)\n"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, &out, &errOut, env); code != 0 || out.String() != tc.want || strings.Contains(out.String(), "retry done") {
				t.Fatalf("exit %d: %q %s, want %q", code, out.String(), errOut.String(), tc.want)
			}
		})
	}
	if strings.Join(as, "") != "ana" {
		t.Errorf("operator headers sent: %q, want ana once (--as given once)", as)
	}
}
