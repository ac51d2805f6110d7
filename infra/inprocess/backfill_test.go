package inprocess

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// want is what a payment must end as, from what the test did at the provider.
type want struct {
	id, pi   string
	status   string
	refunded int64
	dispute  string
}

func droppedEvents(t *testing.T, s *Stack) []map[string]any {
	t.Helper()
	a := call(t, "GET", s.SimURL()+"/_sim/events?state=dropped&limit=10000", "", "")
	var out struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		t.Fatalf("events: %d %s", a.status, a.body)
	}
	return out.Data
}

// TestBackfillAndReconcileHealThirtyPercentLoss: the simulator drops 30% of its deliveries
// (seeded) over 500 payments with refunds (whole and partial), disputes and cancels, and one
// difference of each class a person must decide is seeded (an amount changed, a second charge,
// a payment the provider forgot, a success the provider canceled), plus a silent change the
// provider made ahead of us. One backfill pass applies only dropped events that matter, and
// after it every payment equals the provider's (every other dropped event, a success the API
// had recorded itself or a second report of an applied change, is stale); one
// reconciliation then heals the silent change through the worker and opens exactly the four
// human cases; every other local payment equals the provider's.
func TestBackfillAndReconcileHealThirtyPercentLoss(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1, ReconcileGrace: time.Nanosecond})
	start := s.clock.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	if a := call(t, "POST", s.SimURL()+"/_sim/webhooks/drop", "", `{"rate":0.3,"seed":18}`); a.status != 200 {
		t.Fatalf("drop: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", s.SimURL()+"/_sim/cards", "", `{"payment_method":"pm_bf_slow","processing":true}`); a.status != 200 {
		t.Fatalf("card: %d %s", a.status, a.body)
	}
	const n = 500
	wants := make([]want, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pm := "pm_card_visa"
			if i%11 == 0 {
				pm = "pm_bf_slow"
			}
			a := call(t, "POST", s.APIURL()+"/payments", fmt.Sprintf("bf-%d", i), paymentBody(pm))
			var v payments.View
			if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.ProviderPaymentID == nil {
				errs <- fmt.Errorf("payment %d: %d %s", i, a.status, a.body)
				return
			}
			w := want{id: v.ID, pi: *v.ProviderPaymentID, status: v.Status}
			do := func(a answer, what string) {
				if a.status != 200 {
					errs <- fmt.Errorf("%s %d: %d %s", what, i, a.status, a.body)
				}
			}
			switch {
			case i%11 == 0:
				do(stripeCall(t, s, "POST", "/v1/payment_intents/"+w.pi+"/cancel", ""), "cancel")
				w.status = provider.StatusCanceled
			case i%5 == 0:
				do(stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+w.pi), "refund")
				w.status, w.refunded = provider.StatusRefunded, 2500
			case i%5 == 1:
				do(stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+w.pi+"&amount=1000"), "partial refund")
				w.refunded = 1000
			case i%7 == 2:
				do(call(t, "POST", s.SimURL()+"/_sim/payment_intents/"+w.pi+"/dispute", "", `{"status":"under_review"}`), "dispute")
				w.dispute = "under_review"
			}
			wants[i] = w
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The seeded cases: four for a person, one the provider moved ahead silently.
	human := map[string]string{}
	sim := func(method, path, body string) {
		t.Helper()
		if a := call(t, method, s.SimURL()+path, "", body); a.status >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
		}
	}
	for _, w := range wants {
		if w.status != provider.StatusSucceeded || w.refunded != 0 || w.dispute != "" {
			continue
		}
		switch len(human) {
		case 0:
			sim("POST", "/_sim/payment_intents/"+w.pi+"/mutate", `{"amount":9999}`)
			human[w.id] = "amount_mismatch"
		case 1:
			sim("POST", "/_sim/payment_intents", fmt.Sprintf(`{"amount":2500,"currency":"usd","customer":"cus_e2e","metadata":{"twice_payment_id":%q},"webhook":false}`, w.id))
			human[w.id] = "duplicate_charge"
		case 2:
			sim("DELETE", "/_sim/payment_intents/"+w.pi, "")
			human[w.id] = "missing_at_provider"
		case 3:
			sim("POST", "/_sim/payment_intents/"+w.pi+"/mutate", `{"status":"canceled"}`)
			human[w.id] = "status_mismatch"
		}
		if len(human) == 4 {
			break
		}
	}
	a := call(t, "POST", s.APIURL()+"/payments", "bf-silent", paymentBody("pm_bf_slow"))
	var silent payments.View
	if err := json.Unmarshal([]byte(a.body), &silent); err != nil || silent.ProviderPaymentID == nil {
		t.Fatalf("silent: %d %s", a.status, a.body)
	}
	sim("POST", "/_sim/payment_intents/"+*silent.ProviderPaymentID+"/mutate", `{"status":"succeeded","amount_received":2500}`)
	wants = append(wants, want{id: silent.ID, pi: *silent.ProviderPaymentID, status: provider.StatusSucceeded})

	eventually(t, 60*time.Second, "every delivery that was not dropped is applied", func() bool {
		return strings.Contains(call(t, "GET", s.SimURL()+"/_sim/stats", "", "").body, `"outbox_entries":0`) &&
			queueEmpty(s, webhookQueue)
	})
	dropped := droppedEvents(t, s)
	mattered := map[string]bool{} // dropped events of a type that can move a payment
	for _, e := range dropped {
		typ := e["type"].(string)
		if slices.Contains(payments.StripeEventTypes, typ) && !strings.HasPrefix(typ, "payment_intent.succeeded") && !strings.HasPrefix(typ, "payment_intent.processing") {
			mattered[e["id"].(string)] = true
		}
	}
	if len(dropped) < 150 || len(mattered) == 0 {
		t.Fatalf("%d events dropped (%d that matter): the seeded 30%% should drop far more", len(dropped), len(mattered))
	}
	stale := 0
	for _, w := range wants {
		if p := getPayment(t, s, w.id); p.Status != w.status || p.AmountRefunded != w.refunded || (w.dispute != "") != (p.Dispute != nil) {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no payment is behind the provider before the backfill: the loss was not exercised")
	}

	a = ops(t, s, "POST", "/ops/backfill", "{}")
	if a.status != http.StatusOK {
		t.Fatalf("backfill: %d %s", a.status, a.body)
	}
	var rep backfill.Report
	if err := json.Unmarshal([]byte(a.body), &rep); err != nil {
		t.Fatal(err)
	}
	// Every event it applied is one that was lost and could matter; two lost events that say
	// the same (a refund's charge.refunded and refund.updated) apply once, the second is stale.
	// That it applied all it had to is the state check below.
	for _, id := range rep.Applied {
		if !mattered[id] {
			t.Fatalf("backfill applied %s, which was not a dropped event that matters: %s", id, a.body)
		}
	}
	if len(rep.Applied) == 0 || rep.Requeued != 0 {
		t.Fatalf("backfill applied %d events, requeued %d; %d dropped deliveries mattered (of %d dropped): %s", len(rep.Applied), rep.Requeued, len(mattered), len(dropped), a.body)
	}
	check := func(when string, skip func(want) bool) {
		t.Helper()
		for _, w := range wants {
			if skip(w) {
				continue
			}
			p := getPayment(t, s, w.id)
			if p.Status != w.status || p.AmountRefunded != w.refunded {
				t.Fatalf("payment %s %s: %s refunded %d, want %s refunded %d", w.id, when, p.Status, p.AmountRefunded, w.status, w.refunded)
			}
			if w.dispute != "" && (p.Dispute == nil || p.Dispute.Status != w.dispute) {
				t.Fatalf("payment %s %s: dispute %+v, want %s", w.id, when, p.Dispute, w.dispute)
			}
			if human[w.id] == "" {
				if got := providerView(t, s, w.pi); got.status != w.status || got.refunded != w.refunded {
					t.Fatalf("payment %s: the provider says %+v, the test wants %+v", w.id, got, w)
				}
			}
		}
	}
	check("after the backfill", func(w want) bool { return human[w.id] != "" || w.id == silent.ID })
	// A second pass from the checkpoint replays nothing new.
	a = ops(t, s, "POST", "/ops/backfill", "{}")
	var again backfill.Report
	if err := json.Unmarshal([]byte(a.body), &again); err != nil || len(again.Applied) != 0 {
		t.Fatalf("second pass: %d %s", a.status, a.body)
	}

	window := fmt.Sprintf(`{"from":%q,"to":%q}`, start.Format(time.RFC3339), s.clock.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
	a = ops(t, s, "POST", "/ops/reconcile", window)
	var rr struct {
		Healed map[string]int `json:"healed"`
		Opened map[string]int `json:"opened"`
	}
	if err := json.Unmarshal([]byte(a.body), &rr); err != nil || a.status != http.StatusOK {
		t.Fatalf("reconcile: %d %s", a.status, a.body)
	}
	if got := fmt.Sprint(nonZero(rr.Opened)); got != "map[amount_mismatch:1 duplicate_charge:1 missing_at_provider:1 status_mismatch:1]" {
		t.Fatalf("opened %s\n%s", got, a.body)
	}
	if got := fmt.Sprint(nonZero(rr.Healed)); got != "map[status_mismatch:1]" {
		t.Fatalf("healed %s\n%s", got, a.body)
	}
	recs := opsList(t, s, "limit=100")
	if len(recs) != 4 {
		t.Fatalf("%d dead-letter records, want the 4 seeded human cases: %v", len(recs), recs)
	}
	for _, r := range recs {
		if id, _ := r["payment_id"].(string); human[id] == "" || r["class"] != "recon_"+human[id] {
			t.Fatalf("dead-letter record %v is not a seeded human case", r)
		}
	}
	check("after the reconciliation", func(w want) bool { return human[w.id] != "" })
	t.Logf("500 payments, %d deliveries dropped, %d that mattered: backfill applied %d, reconciliation healed %v and opened %v",
		len(dropped), len(mattered), len(rep.Applied), nonZero(rr.Healed), nonZero(rr.Opened))
}

type providerState struct {
	status   string
	refunded int64
}

// providerView is the simulator's PaymentIntent in our vocabulary.
func providerView(t *testing.T, s *Stack, pi string) providerState {
	t.Helper()
	a := stripeCall(t, s, "GET", "/v1/payment_intents/"+pi+"?expand[]=latest_charge", "")
	var v struct {
		Status       string `json:"status"`
		LatestCharge *struct {
			AmountRefunded int64 `json:"amount_refunded"`
			Refunded       bool  `json:"refunded"`
		} `json:"latest_charge"`
	}
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != 200 {
		t.Fatalf("provider %s: %d %s", pi, a.status, a.body)
	}
	st := providerState{status: v.Status}
	if v.LatestCharge != nil {
		st.refunded = v.LatestCharge.AmountRefunded
		if v.LatestCharge.Refunded {
			st.status = provider.StatusRefunded
		}
	}
	return st
}

func queueEmpty(s *Stack, name string) bool {
	st, err := s.queues[name].Stats()
	return err == nil && st.Visible == 0 && st.NotVisible == 0
}

// TestRefundOfAThreeDayOldPayment: a payment created three days before; its refund's webhook
// is lost. Reconciliation on demand (no window: up to now) compares it because its refund event
// is in the window, and heals it through the worker; a second such refund is found by the next
// scheduled pass (backfill, then reconciliation).
func TestRefundOfAThreeDayOldPayment(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Addr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", ReconcileEvery: -1,
		ReconcileGrace: time.Nanosecond, ClockStart: testClockStart, Log: slog.New(slog.DiscardHandler)}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Start()
	a, b := succeeded(t, first, "old-a"), succeeded(t, first, "old-b")
	eventually(t, 20*time.Second, "the successes are delivered", func() bool {
		return strings.Contains(call(t, "GET", first.SimURL()+"/_sim/stats", "", "").body, `"outbox_entries":0`) && queueEmpty(first, webhookQueue)
	})
	// The first scheduled pass ever: the checkpoint starts here.
	first.scheduledPass(t.Context())
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// The same data three days on, before anything runs.
	later, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	later.clock.Base = later.clock.Base.Add(72 * time.Hour)
	later.Start()
	t.Cleanup(func() { later.Close() })

	refundLost := func(v payments.View) {
		t.Helper()
		// A refund sends refund.created and charge.refunded: both are lost.
		if r := call(t, "POST", later.SimURL()+"/_sim/webhooks/drop", "", `{"count":2}`); r.status != 200 {
			t.Fatalf("drop: %d %s", r.status, r.body)
		}
		if r := stripeCall(t, later, "POST", "/v1/refunds", "payment_intent="+deref(v.ProviderPaymentID)); r.status != 200 {
			t.Fatalf("refund: %d %s", r.status, r.body)
		}
		if p := getPayment(t, later, v.ID); p.Status != provider.StatusSucceeded {
			t.Fatalf("%s is %s before anything ran", v.ID, p.Status)
		}
	}
	refundLost(a)
	r := ops(t, later, "POST", "/ops/reconcile", "")
	var rep struct {
		Window struct {
			From, To time.Time
		} `json:"window"`
		Healed   map[string]int `json:"healed"`
		Replayed bool           `json:"replayed"`
	}
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil || r.status != 200 {
		t.Fatalf("reconcile: %d %s", r.status, r.body)
	}
	now := later.clock.Now().UTC().Truncate(time.Second)
	// The refund itself is missing from a's ledger: it is adopted, and a's status follows.
	if !rep.Window.To.Equal(now) || rep.Replayed || rep.Healed["refund_missing_locally"] != 1 {
		t.Fatalf("reconcile with no window: %s (now %s)", r.body, now)
	}
	if p := getPayment(t, later, a.ID); p.Status != provider.StatusRefunded {
		t.Fatalf("the 3-day-old payment is %s after reconciliation", p.Status)
	}

	refundLost(b)
	bf, _ := later.scheduledPass(t.Context())
	// b's charge.refunded and refund.created; a's refund.created is stale, as reconciliation
	// already put that refund on a's ledger.
	if len(bf.Applied) != 2 {
		t.Fatalf("the scheduled backfill applied %v", bf.Applied)
	}
	if p := getPayment(t, later, a.ID); len(p.Refunds) != 1 || p.AmountRefunded != 2500 {
		t.Fatalf("the payment reconciliation healed, after the scheduled pass: %+v", p)
	}
	if p := getPayment(t, later, b.ID); p.Status != provider.StatusRefunded || p.AmountRefunded != 2500 {
		t.Fatalf("the 3-day-old payment after the scheduled pass: %+v", p)
	}
}
