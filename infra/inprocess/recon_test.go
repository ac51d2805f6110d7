package inprocess

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
)

func succeeded(t *testing.T, s *Stack, key string) payments.View {
	t.Helper()
	a := call(t, "POST", s.APIURL()+"/payments", key, paymentBody("pm_card_visa"))
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusCreated {
		t.Fatalf("%s: %d %s", key, a.status, a.body)
	}
	return v
}

// TestSeededDivergenceIsReportedExactly seeds one difference of each class through the
// simulator's controls, and checks the first reconciliation reports exactly those, as one
// dead-letter record each, and that a re-run and an overlapping run add nothing.
func TestSeededDivergenceIsReportedExactly(t *testing.T) {
	s := newStack(t, Config{ReconcileGrace: time.Nanosecond, ReconcileEvery: -1})
	start := s.clock.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	clean := succeeded(t, s, "clean")
	dup := succeeded(t, s, "duplicated")
	gone := succeeded(t, s, "gone")
	amount := succeeded(t, s, "amount")
	status := succeeded(t, s, "status")
	sim := func(method, path, body string) {
		t.Helper()
		a := call(t, method, s.SimURL()+path, "", body)
		if a.status >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
		}
	}
	// Let the simulator's webhooks for these land first, so nothing is still settling.
	eventually(t, 10*time.Second, "webhooks delivered", func() bool {
		return strings.Contains(call(t, "GET", s.SimURL()+"/_sim/stats", "", "").body, `"outbox_entries":0`)
	})
	sim("DELETE", "/_sim/payment_intents/"+deref(gone.ProviderPaymentID), "")
	sim("POST", "/_sim/payment_intents/"+deref(amount.ProviderPaymentID)+"/mutate", `{"amount":9999}`)
	sim("POST", "/_sim/payment_intents/"+deref(status.ProviderPaymentID)+"/mutate", `{"status":"canceled"}`)
	sim("POST", "/_sim/payment_intents", `{"amount":700,"currency":"usd","customer":"cus_stranger","webhook":false}`)
	sim("POST", "/_sim/payment_intents", fmt.Sprintf(`{"amount":2500,"currency":"usd","customer":"cus_e2e","metadata":{"twice_payment_id":%q},"webhook":false}`, dup.ID))
	_ = clean

	// Windows are inclusive at second precision: ending at this second covers everything so far.
	window := fmt.Sprintf(`{"from":%q,"to":%q}`, start.Format(time.RFC3339), s.clock.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
	a := ops(t, s, "POST", "/ops/reconcile", window)
	if a.status != http.StatusOK {
		t.Fatalf("reconcile: %d %s", a.status, a.body)
	}
	var rep struct {
		Found  map[string]int `json:"found"`
		Opened map[string]int `json:"opened"`
	}
	json.Unmarshal([]byte(a.body), &rep)
	want := "map[amount_mismatch:1 duplicate_charge:1 missing_at_provider:1 missing_locally:1 status_mismatch:1]"
	if got := fmt.Sprint(nonZero(rep.Opened)); got != want {
		t.Fatalf("opened %v, want %s\n%s", got, want, a.body)
	}
	if n := len(opsList(t, s, "source=reconciliation")); n != 5 {
		t.Fatalf("%d dead-letter records, want 5", n)
	}
	// The same window again: the stored report, nothing new. An overlapping window: the same
	// differences, already open, so nothing new either.
	if a := ops(t, s, "POST", "/ops/reconcile", window); a.status != http.StatusOK || !strings.Contains(a.body, `"replayed":true`) {
		t.Fatalf("re-run: %d %s", a.status, a.body)
	}
	wider := fmt.Sprintf(`{"from":%q,"to":%q}`, start.Add(-time.Hour).Format(time.RFC3339), s.clock.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
	if a := ops(t, s, "POST", "/ops/reconcile", wider); a.status != http.StatusOK {
		t.Fatalf("overlapping run: %d %s", a.status, a.body)
	}
	if n := len(opsList(t, s, "source=reconciliation")); n != 5 {
		t.Fatalf("%d dead-letter records after the re-runs, want 5", n)
	}
	if a := ops(t, s, "POST", "/ops/reconcile", `{"from":"yesterday"}`); a.status != http.StatusBadRequest {
		t.Fatalf("bad window: %d %s", a.status, a.body)
	}
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
