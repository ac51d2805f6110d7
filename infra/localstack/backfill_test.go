package localstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/payments"
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

// TestBackfillHealsThirtyPercentLoss: the simulator drops 30% of its deliveries (seeded) over
// 500 payments with refunds (whole and partial), disputes and cancels; one backfill pass then
// makes every local payment what the provider says, and it applied exactly the dropped events
// that mattered (every other dropped event, a success the API had recorded itself, is stale).
func TestBackfillHealsThirtyPercentLoss(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1})
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
				w.status = payments.StatusCanceled
			case i%5 == 0:
				do(stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+w.pi), "refund")
				w.status, w.refunded = payments.StatusRefunded, 2500
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
	eventually(t, 60*time.Second, "every delivery that was not dropped is applied", func() bool {
		return strings.Contains(call(t, "GET", s.SimURL()+"/_sim/stats", "", "").body, `"outbox_entries":0`) &&
			queueEmpty(s, webhookQueue)
	})
	dropped := droppedEvents(t, s)
	mattered := 0
	for _, e := range dropped {
		if typ := e["type"].(string); !strings.HasPrefix(typ, "payment_intent.succeeded") && !strings.HasPrefix(typ, "payment_intent.processing") {
			mattered++
		}
	}
	if len(dropped) < 150 || mattered == 0 {
		t.Fatalf("%d events dropped (%d that matter): the seeded 30%% should drop far more", len(dropped), mattered)
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

	a := ops(t, s, "POST", "/ops/backfill", "{}")
	if a.status != http.StatusOK {
		t.Fatalf("backfill: %d %s", a.status, a.body)
	}
	var rep backfill.Report
	if err := json.Unmarshal([]byte(a.body), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Applied) != mattered || rep.Requeued != 0 {
		t.Fatalf("backfill applied %d events, requeued %d; %d dropped deliveries mattered (of %d dropped)", len(rep.Applied), rep.Requeued, mattered, len(dropped))
	}
	for _, w := range wants {
		p := getPayment(t, s, w.id)
		if p.Status != w.status || p.AmountRefunded != w.refunded {
			t.Fatalf("payment %s after the backfill: %s refunded %d, want %s refunded %d", w.id, p.Status, p.AmountRefunded, w.status, w.refunded)
		}
		if w.dispute != "" && (p.Dispute == nil || p.Dispute.Status != w.dispute) {
			t.Fatalf("payment %s after the backfill: dispute %+v, want %s", w.id, p.Dispute, w.dispute)
		}
	}
	// A second pass from the checkpoint replays nothing new.
	a = ops(t, s, "POST", "/ops/backfill", "{}")
	if err := json.Unmarshal([]byte(a.body), &rep); err != nil || len(rep.Applied) != 0 {
		t.Fatalf("second pass: %d %s", a.status, a.body)
	}
	t.Logf("500 payments, %d deliveries dropped, %d that mattered, all applied by one backfill pass", len(dropped), mattered)
}

func queueEmpty(s *Stack, name string) bool {
	st, err := s.queues[name].Stats()
	return err == nil && st.Visible == 0 && st.NotVisible == 0
}
