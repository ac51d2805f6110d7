package opsapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// recoveryFixture serves the operator API over a store holding two payments in recovery (one
// scheduled, one stopped).
func recoveryFixture(t *testing.T) fixture {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "ops.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := func() time.Time { return time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC) }
	tb := &deadletter.Records{Store: s, Requeuer: &counter{}, Now: now, Log: slog.New(slog.DiscardHandler)}
	log, err := attempts.NewLog(attempts.Log{Store: s, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	putAll := func(ws []store.Write, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Transact(context.Background(), ws...); err != nil {
			t.Fatal(err)
		}
	}
	put := func(w store.Write, err error) { t.Helper(); putAll([]store.Write{w}, err) }
	for _, id := range []string{"pay_running", "pay_stopped"} {
		put(payments.Payment{ID: id, Status: provider.StatusDeclined, Amount: 2500, Currency: "usd", Customer: "cus_1",
			Card: &payments.CardRef{Fingerprint: "fp_" + id, Brand: "visa"}, CreatedAt: now(), UpdatedAt: now(), Version: 1}.Put())
	}
	putAll(payments.Recovery{PaymentID: "pay_running", State: payments.RecoveryScheduled, Round: 1, Attempts: 2,
		NextAttemptAt: now().Add(26 * time.Hour), Reason: "funded_moment", Amount: 2500, Currency: "usd",
		Explanation: "Retrying on 1 Dec at 09:12 UTC, the next payday, because the card issuer declined: insufficient funds.",
		CardBrand:   "mastercard", Seq: 1}.Writes())
	putAll(payments.Recovery{PaymentID: "pay_stopped", State: payments.RecoveryStopped, Round: 1, Attempts: 1,
		Explanation: "Not retrying because the card was reported lost.", DeadLetter: "recovery:pay_stopped:1", Seq: 1}.Writes())
	sp := opsapi.StorePayments{Store: s}
	h, err := opsapi.New(opsapi.Handler{Records: tb, Attempts: log, Payments: sp, Recoveries: sp, Token: token, Now: now,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fixture{srv: srv, table: tb, log: log}
}

func TestRunningRecoveries(t *testing.T) {
	f := recoveryFixture(t)
	t.Run("the JSON list needs the operator and holds only running ones", func(t *testing.T) {
		if resp, _ := f.do(t, "GET", "/ops/recoveries", "", false); resp.StatusCode != 401 {
			t.Fatalf("unauthenticated: %d", resp.StatusCode)
		}
		resp, body := f.do(t, "GET", "/ops/recoveries", "", true)
		var page struct {
			Recoveries []payments.Recovery `json:"recoveries"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
		}
		if len(page.Recoveries) != 1 || page.Recoveries[0].PaymentID != "pay_running" || page.Recoveries[0].CardBrand != "mastercard" {
			t.Fatalf("recoveries %+v", page.Recoveries)
		}
	})
	t.Run("a bad limit is a problem", func(t *testing.T) {
		resp, body := f.do(t, "GET", "/ops/recoveries?limit=1000", "", true)
		if resp.StatusCode != 400 || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") || !strings.Contains(body, "limit") {
			t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})
	c := consoleClient(t, f)
	t.Run("the console lists them with next attempt, reason and card, linked to the payment", func(t *testing.T) {
		code, page := get(t, c, f.srv.URL+"/ops/running")
		for _, want := range []string{`href="/ops/payments/pay_running"`, "mastercard", "the next payday", "30 Nov 2026 11:00 UTC", "25.00 USD"} {
			if !strings.Contains(page, want) {
				t.Errorf("the list lacks %q", want)
			}
		}
		if code != 200 || strings.Contains(page, "pay_stopped") {
			t.Fatalf("%d; a stopped recovery is listed or the page failed:\n%s", code, page)
		}
	})
	t.Run("the payment page shows its recovery", func(t *testing.T) {
		code, page := get(t, c, f.srv.URL+"/ops/payments/pay_stopped")
		if code != 200 || !strings.Contains(page, `id="recovery-state">stopped`) || !strings.Contains(page, "reported lost") ||
			!strings.Contains(page, `id="card-attempts-left">20`) ||
			!strings.Contains(page, `href="/ops/records/recovery:pay_stopped:1"`) {
			t.Fatalf("%d\n%s", code, page)
		}
	})
}
