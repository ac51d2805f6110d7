package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// steerFactor runs recovery time 100 times faster: a payday days away stays far off while
// the test steers, and the few checkpoints between a signal and its charge (tens of
// milliseconds) stay seconds of recovery time.
const steerFactor = 100

// parkedRecovery declines a payment for insufficient funds (the next try days away) and waits
// until its recovery is parked with its timer.
func parkedRecovery(t *testing.T, s *Stack, key, pm string) (payments.View, asl.Execution) {
	t.Helper()
	programCard(t, s.SimURL(), pm, "insufficient_funds", 1)
	v := createDeclined(t, s, key, pm)
	var ex asl.Execution
	eventually(t, 10*time.Second, "the recovery of "+key+" is parked", func() bool {
		rec, err := payments.GetRecovery(context.Background(), s.store, v.ID)
		if err != nil || rec.Resume == "" {
			return false
		}
		all, _ := s.runner.ListExecutions(context.Background(), recoveryMachine)
		for _, e := range all {
			if strings.Contains(e.ExecutionArn, "inv_"+key) {
				ex = e
			}
		}
		return ex.ExecutionArn != ""
	})
	return v, ex
}

// stateEntered is when the recovery that first started last entered the state, in any of its
// executions.
func stateEntered(t *testing.T, s *Stack, first asl.Execution, state string) time.Time {
	t.Helper()
	var at time.Time
	for _, e := range recoveryHistory(t, s, first) {
		if strings.HasSuffix(e.Type, "StateEntered") && e.StateName == state {
			at = e.Timestamp
		}
	}
	return at
}

// TestOperatorChargeNowThroughTheAPI: a recovery parked until a payday days away; the operator's
// charge-now brings the wait forward, and the charge happens within a minute of recovery time, once.
func TestOperatorChargeNowThroughTheAPI(t *testing.T) {
	s := newStack(t, Config{TimeFactor: steerFactor})
	v, ex := parkedRecovery(t, s, "steer-now", "pm_steer_now")
	a := ops(t, s, "POST", "/ops/recoveries/"+v.ID+"/charge-now", `{"note":"customer called"}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("charge-now: %d %s", a.status, a.body)
	}
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	got := paymentWithRecovery(t, s, v.ID)
	if got.Status != provider.StatusSucceeded || got.Recovery == nil || got.Recovery.State != payments.RecoverySucceeded {
		t.Fatalf("payment %+v recovery %+v", got, got.Recovery)
	}
	steered, charged := stateEntered(t, s, ex, "Steer"), stateEntered(t, s, ex, "Charge")
	if steered.IsZero() || charged.Sub(steered) > time.Minute || charged.Before(steered) {
		t.Fatalf("steered at %s, charged at %s: want the charge within a minute of recovery time", steered, charged)
	}
	if evs := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(evs) != "[payment_failed succeeded]" {
		t.Fatalf("charges at the provider: %v, want the original and one more", evs)
	}
	// A second charge-now finds no running recovery.
	if a := ops(t, s, "POST", "/ops/recoveries/"+v.ID+"/charge-now", ""); a.status != http.StatusConflict {
		t.Fatalf("charge-now after the end: %d %s", a.status, a.body)
	}
	t.Logf("charged %s after the operator's signal (recovery time)", charged.Sub(steered))
}

// TestOperatorStopThroughTheAPI: stop ends a parked recovery without a charge or a dead letter.
func TestOperatorStopThroughTheAPI(t *testing.T) {
	s := newStack(t, Config{TimeFactor: steerFactor})
	v, ex := parkedRecovery(t, s, "steer-stop", "pm_steer_stop")
	if a := ops(t, s, "POST", "/ops/recoveries/"+v.ID+"/stop", `{"note":"paid by bank transfer"}`); a.status != http.StatusAccepted {
		t.Fatalf("stop: %d %s", a.status, a.body)
	}
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	var out struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(done.Output, &out)
	got := paymentWithRecovery(t, s, v.ID)
	if out.Outcome != "stopped" || got.Status != provider.StatusDeclined || got.Recovery.State != payments.RecoveryStopped ||
		!strings.Contains(got.Recovery.Explanation, "operator stopped") || !strings.Contains(got.Recovery.Explanation, "paid by bank transfer") {
		t.Fatalf("outcome %q, payment %s, recovery %+v", out.Outcome, got.Status, got.Recovery)
	}
	if evs := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(evs) != "[payment_failed]" {
		t.Fatalf("a stopped recovery charged: %v", evs)
	}
	if recs := opsList(t, s, "source=recovery&status=open"); len(recs) != 0 {
		t.Fatalf("a stop opened dead letters: %v", recs)
	}
	if a := ops(t, s, "POST", "/ops/recoveries/"+v.ID+"/bogus", ""); a.status != http.StatusBadRequest {
		t.Fatalf("unknown action: %d %s", a.status, a.body)
	}
}

func customerEvent(t *testing.T, s *Stack, customer, body string) {
	t.Helper()
	if a := call(t, "POST", s.SimURL()+"/_sim/customers/"+customer+"/events", "", body); a.status != 200 {
		t.Fatalf("customer event: %d %s", a.status, a.body)
	}
}

// TestCardUpdateDuringTheWait: while a recovery waits days for a payday, the customer attaches a
// new card (the simulator's payment_method.attached webhook). The worker commits a steering
// signal with the event; the next charge happens within a minute of recovery time, with the new
// payment method, exactly once.
func TestCardUpdateDuringTheWait(t *testing.T) {
	s := newStack(t, Config{TimeFactor: steerFactor})
	v, ex := parkedRecovery(t, s, "steer-card", "pm_steer_card")
	customerEvent(t, s, "cus_rec", `{"type":"payment_method.attached","payment_method":"pm_card_visa"}`)
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	got := paymentWithRecovery(t, s, v.ID)
	if got.Status != provider.StatusSucceeded {
		t.Fatalf("payment %+v", got)
	}
	steered, charged := stateEntered(t, s, ex, "Steer"), stateEntered(t, s, ex, "Charge")
	if steered.IsZero() || charged.Sub(steered) > time.Minute || charged.Before(steered) {
		t.Fatalf("steered at %s, charged at %s", steered, charged)
	}
	if evs := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(evs) != "[payment_failed succeeded]" {
		t.Fatalf("charges at the provider: %v, want the original and one more", evs)
	}
	req, _ := http.NewRequest("GET", s.SimURL()+"/v1/payment_intents/"+deref(v.ProviderPaymentID), nil)
	req.SetBasicAuth(DefaultStripeAPIKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pi, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(pi), `"payment_method":"pm_card_visa"`) {
		t.Fatalf("the recovery charge did not use the new card: %s", pi)
	}
	stored, err := payments.Get(context.Background(), s.store, v.ID)
	if err != nil || stored.PaymentMethod != "pm_card_visa" {
		t.Fatalf("stored payment method %q, %v", stored.PaymentMethod, err)
	}
	t.Logf("charged %s after the card update (recovery time)", charged.Sub(steered))
}

// TestInvoicePaidElsewhereStopsTheRecovery: invoice.paid for the recovery's invoice ends it
// settled, without a charge or a dead letter.
func TestInvoicePaidElsewhereStopsTheRecovery(t *testing.T) {
	s := newStack(t, Config{TimeFactor: steerFactor})
	v, ex := parkedRecovery(t, s, "steer-paid", "pm_steer_paid")
	customerEvent(t, s, "cus_rec", `{"type":"invoice.paid","invoice":"inv_steer-paid"}`)
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	got := paymentWithRecovery(t, s, v.ID)
	if got.Recovery == nil || got.Recovery.State != payments.RecoverySettled || !strings.Contains(got.Recovery.Explanation, "invoice was paid another way") {
		t.Fatalf("recovery %+v", got.Recovery)
	}
	if evs := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(evs) != "[payment_failed]" {
		t.Fatalf("a recovery of a paid invoice charged: %v", evs)
	}
	if recs := opsList(t, s, "source=recovery&status=open"); len(recs) != 0 {
		t.Fatalf("dead letters: %v", recs)
	}
}
