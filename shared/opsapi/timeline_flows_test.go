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

// The timeline of a payment that waited for its customer, was authorized, captured and then
// refunded three times (one succeeded, one failed, one made in the provider's dashboard) has
// one row per event: each API call (the create, the capture, a cancel refused after it, the refunds asked for), the
// authentication wait, each refund's outcome, and the refund made elsewhere; a replayed refund
// call is its own row, marked replayed. The create's answer held the client secret: no row and
// no field carries it.
func TestTimelineShowsRefundsCaptureAndTheAuthenticationWait(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "ops.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	now := func() time.Time { return at(60) }
	tb := &deadletter.Records{Store: s, Requeuer: &counter{}, Now: now, Log: slog.New(slog.DiscardHandler)}
	log, err := attempts.NewLog(attempts.Log{Store: s, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id, secret = "pay_flow", "pi_flow_secret_0123456789abcdef"
	w, err := payments.Payment{ID: id, Status: provider.StatusSucceeded, Amount: 5000, Currency: "usd", Customer: "cus_1",
		ProviderPaymentID: "pi_flow", CaptureMethod: payments.CaptureManual, CreatedAt: t0, UpdatedAt: at(5), Version: 3}.Put()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	u := payments.RefundUpdate{PaymentID: id, Now: at(30), Source: "api",
		Commit: func(ctx context.Context, ws []store.Write) error { return s.Transact(ctx, ws...) }}
	if _, _, err := payments.UpdateRefunds(ctx, s, u, func(_ *payments.Payment, l *payments.RefundLedger) error {
		l.Refunds = append(l.Refunds,
			payments.RefundEntry{ID: "rf_ok", Key: "r-1", ProviderRefundID: "re_1", Amount: 1000, Currency: "usd", Status: provider.RefundSucceeded, CreatedAt: at(10), UpdatedAt: at(11)},
			payments.RefundEntry{ID: "rf_bad", Key: "r-2", ProviderRefundID: "re_2", Amount: 700, Currency: "usd", Status: provider.RefundFailed, FailureReason: "expired_or_canceled_card", CreatedAt: at(12), UpdatedAt: at(20)},
			payments.RefundEntry{ID: "re_dash", ProviderRefundID: "re_dash", Amount: 300, Currency: "usd", Status: provider.RefundSucceeded, CreatedAt: at(25), UpdatedAt: at(26)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	api := func(m int, op, method, path, key, status, body string, replayed bool) {
		t.Helper()
		a := attempts.Attempt{Direction: attempts.Inbound, Provider: "api", Operation: op, Method: method, Path: path, Status: 201,
			IdempotencyKey: key, PaymentID: id, StartedAt: at(m), Duration: 40 * time.Millisecond, ResponseBody: body, Replayed: replayed,
			Result: status}
		if err := log.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	api(0, "payments.create", "POST", "/payments", "c-1", "ok",
		`{"id":"pay_flow","status":"requires_action","client_secret":"`+secret+`","next_action":{"type":"use_stripe_sdk"}}`, false)
	api(4, "payments.capture", "POST", "/payments/pay_flow/capture", "cap-1", "ok", `{"id":"pay_flow","status":"succeeded"}`, false)
	api(6, "payments.cancel", "POST", "/payments/pay_flow/cancel", "x-1", "rejected", `{"type":"payment-state"}`, false)
	api(10, "payments.refund", "POST", "/payments/pay_flow/refunds", "r-1", "ok", `{"id":"rf_ok","status":"succeeded"}`, false)
	api(11, "payments.refund", "POST", "/payments/pay_flow/refunds", "r-1", "ok", `{"id":"rf_ok","status":"succeeded"}`, true)
	api(12, "payments.refund", "POST", "/payments/pay_flow/refunds", "r-2", "ok", `{"id":"rf_bad","status":"succeeded"}`, false)

	sp := opsapi.StorePayments{Store: s}
	h, err := opsapi.New(opsapi.Handler{Records: tb, Attempts: log, Payments: sp, Token: token, Now: now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := fixture{srv: srv, table: tb, log: log}
	resp, body := f.do(t, "GET", "/ops/payments/"+id+"/timeline", "", true)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, secret) {
		t.Fatal("the timeline carries the client secret")
	}
	var tl opsapi.Timeline
	if err := json.Unmarshal([]byte(body), &tl); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tl.Rows {
		row := r.Kind + ": " + r.Title
		if r.Replayed {
			row += " [replayed]"
		}
		got = append(got, row)
	}
	want := []string{
		"api: API payments.create",
		"customer: waiting for the customer to authenticate (3-D Secure)",
		"api: capture requested (API POST /payments/pay_flow/capture)",
		"api: cancel requested (API POST /payments/pay_flow/cancel)",
		"api: refund requested (API POST /payments/pay_flow/refunds)",
		"api: refund requested (API POST /payments/pay_flow/refunds) [replayed]",
		"refund: refund succeeded",
		"api: refund requested (API POST /payments/pay_flow/refunds)",
		"refund: refund failed: expired_or_canceled_card",
		"refund: refund made at the provider",
		"refund: refund succeeded",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wait := tl.Rows[1]
	if wait.Result != "ended" || !strings.Contains(wait.Detail, "next action: use_stripe_sdk") || !strings.Contains(wait.Detail, "now succeeded") {
		t.Errorf("the wait row: %+v", wait)
	}
	if p := tl.Payment; len(p.Refunds) != 3 || p.Refunds[1].Status != "failed" || p.Refunds[1].FailureReason == nil || p.AmountRefunded != 1300 {
		t.Errorf("the timeline's payment: %+v", p)
	}
}
