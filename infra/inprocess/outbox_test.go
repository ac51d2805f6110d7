package inprocess

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/store"
)

// searchIntents counts the simulator's PaymentIntents for one payment of ours, by the metadata
// every create carries (the Search API the resolver itself uses past the key horizon).
func searchIntents(t *testing.T, simURL, paymentID string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", simURL+"/v1/payment_intents/search?query="+
		strings.ReplaceAll(fmt.Sprintf("metadata['%s']:'%s'", payments.MetaPaymentID, paymentID), "'", "%27"), nil)
	req.SetBasicAuth(DefaultStripeAPIKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("search: %d %v", resp.StatusCode, err)
	}
	return len(out.Data)
}

// TestRetryAfterTheProviderForgotTheKey: the provider charges and times out, the stack answers
// 202; 25 hours later (the stack restarted with its clock there) and with the simulator's keys
// expired, the client retries the same key and body: the answer is the resolved payment, as a
// replay, and the provider holds exactly one PaymentIntent for it.
func TestRetryAfterTheProviderForgotTheKey(t *testing.T) {
	dir := t.TempDir()
	// The background resolver waits an hour of wall time: the client's retry resolves it here.
	cfg := Config{DataDir: dir, ProviderTimeout: 300 * time.Millisecond, ResolveDelay: time.Hour,
		Addr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	armFault(t, s.SimURL(), "timeout_after_effect", 1)
	body := `{"amount":2500,"currency":"usd","customer":"cus_e2e","payment_method":"pm_card_visa","metadata":{}}`
	first := call(t, "POST", s.APIURL()+"/payments", "forgotten-1", body)
	var v payments.View
	if err := json.Unmarshal([]byte(first.body), &v); err != nil || first.status != http.StatusAccepted || v.Status != "pending" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	later, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 25 hours on, before anything runs (the accelerated clock is read by every component):
	// Base moves, not Anchor, which would move the clock back.
	later.clock.Base = later.clock.Base.Add(25 * time.Hour) // Now = Base + (wall - Anchor) x Factor
	later.Start()
	t.Cleanup(func() { later.Close() })
	// The simulator's own sweep may have forgotten the key already at 25 h; expire the rest.
	exp := call(t, "POST", later.SimURL()+"/_sim/idempotency/expire", "", `{"older_than_s":0}`)
	if exp.status != 200 || !strings.HasPrefix(exp.body, `{"expired":`) {
		t.Fatalf("expire: %d %s", exp.status, exp.body)
	}
	// Different bytes under the pending key are still refused, naming the field.
	if mm := call(t, "POST", later.APIURL()+"/payments", "forgotten-1", strings.Replace(body, "2500", "2600", 1)); mm.status != 422 || !strings.Contains(mm.body, `"amount"`) {
		t.Fatalf("different body: %d %s", mm.status, mm.body)
	}
	again := call(t, "POST", later.APIURL()+"/payments", "forgotten-1", body)
	if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" ||
		!strings.Contains(again.body, `"status":"succeeded"`) || !strings.Contains(again.body, v.ID) {
		t.Fatalf("retry after 25 h: %d %v %s", again.status, again.header, again.body)
	}
	if n := searchIntents(t, later.SimURL(), v.ID); n != 1 {
		t.Fatalf("the provider holds %d PaymentIntents for %s, want 1", n, v.ID)
	}
	if third := call(t, "POST", later.APIURL()+"/payments", "forgotten-1", body); third.body != again.body {
		t.Fatalf("replay differs: %s vs %s", third.body, again.body)
	}
}

func armStarts(t *testing.T, s *Stack, n int) FaultCounts {
	t.Helper()
	req, _ := http.NewRequest("POST", s.APIURL()+"/ops/_faults", strings.NewReader(fmt.Sprintf(`{"target":"start_execution","count":%d}`, n)))
	if n < 0 {
		req, _ = http.NewRequest("GET", s.APIURL()+"/ops/_faults", nil)
	}
	req.Header.Set("Authorization", "Bearer "+DefaultOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c FaultCounts
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("faults: %d %v", resp.StatusCode, err)
	}
	return c
}

// TestRecoveryStartSurvivesFiveFailures: StartExecution fails five times (as a throttled Step
// Functions would); the decline's outbox message is retried until the recovery starts, exactly
// once, though both the API and the payment_failed webhook asked for it.
func TestRecoveryStartSurvivesFiveFailures(t *testing.T) {
	s := newStack(t, Config{TimeFactor: 1})
	if a := call(t, "POST", s.APIURL()+"/ops/_faults", "", `{"target":"start_execution","count":5}`); a.status != http.StatusUnauthorized {
		t.Fatalf("without the operator token: %d", a.status)
	}
	armStarts(t, s, 5)
	v := createDeclined(t, s, "five-fails", "pm_card_visa_chargeDeclinedInsufficientFunds")
	id := "recovery#" + v.ID + "#r1"
	eventually(t, 30*time.Second, "the recovery started after five failed starts", func() bool {
		_, err := s.store.Get(t.Context(), outbox.Table, id, "")
		c := armStarts(t, s, -1)
		return errors.Is(err, store.ErrNotFound) && c.Failed == 5 && c.Started == 1
	})
	// The webhook's own copy of the message may arrive later; it names the same execution.
	eventually(t, 10*time.Second, "the payment_failed webhook applied", func() bool {
		st := simStats(t, s)
		pending, _ := st["webhooks_pending"].(float64)
		return pending == 0
	})
	if _, _, err := s.relay.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := armStarts(t, s, -1); c.Started != 1 || c.Failed != 5 {
		t.Fatalf("starts %+v, want 5 failed and 1 started", c)
	}
}

// TestOutboxSurvivesKill9: the recovery start cannot be delivered (every start fails) when
// the stack is killed with -9 right after the decline committed; after the restart, with no
// fault armed, the committed message is delivered and the recovery starts once.
func TestOutboxSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	p := startProcess(t, t.TempDir())
	s := p.stack()
	armStarts(t, s, 1000)
	v := createDeclined(t, s, "kill-outbox", "pm_card_visa_chargeDeclinedInsufficientFunds")
	eventually(t, 10*time.Second, "a start was tried and failed", func() bool { return armStarts(t, s, -1).Failed > 0 })
	if c := armStarts(t, s, -1); c.Started != 0 {
		t.Fatalf("started before the kill: %+v", c)
	}
	p.kill()
	p.start()
	eventually(t, 30*time.Second, "the committed recovery start is delivered after the restart", func() bool {
		return armStarts(t, s, -1).Started == 1
	})
	_ = v
}

// FuzzFaultsBody: the /ops/_faults parser takes only the one documented shape and never panics.
func FuzzFaultsBody(f *testing.F) {
	for _, s := range []string{`{"target":"start_execution","count":5}`, `{"target":"x","count":1}`, `{"count":-1}`, `[`, `{"target":"start_execution","count":1}{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		n, err := parseFaults(strings.NewReader(body))
		if err == nil && (n < 0 || n > 1000 || !strings.Contains(body, "start_execution")) {
			t.Fatalf("accepted %q as %d", body, n)
		}
	})
}
