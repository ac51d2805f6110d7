package inprocess

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// TestBackfillRequeueGoesThroughTheOutbox: locally as in AWS, an event the backfill cannot apply
// now (it names a payment of ours that is not stored) is committed to the outbox, and the relay,
// not the pass, sends it to the webhook queue, where the worker takes it (and, failing it while
// the payment is missing, leaves it to the queue's retries).
func TestBackfillRequeueGoesThroughTheOutbox(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1})
	ctx := context.Background()
	start := s.clock.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	missing := payments.PaymentID("local", "bf-not-yet")
	a := call(t, "POST", s.SimURL()+"/_sim/payment_intents", "",
		fmt.Sprintf(`{"amount":2500,"currency":"usd","customer":"cus_rq","metadata":{"twice_payment_id":%q},"webhook":false}`, missing))
	if a.status != http.StatusOK {
		t.Fatalf("sim create: %d %s", a.status, a.body)
	}
	var eventID string
	for ev, err := range s.backfill.Events.Events(ctx, provider.EventQuery{CreatedFrom: start}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "payment_intent.succeeded" {
			eventID = ev.ID
		}
	}
	if eventID == "" {
		t.Fatal("the simulator logged no payment_intent.succeeded")
	}
	if !queueEmpty(s, webhookQueue) {
		t.Fatal("the webhook queue is not empty before the pass")
	}
	a = ops(t, s, "POST", "/ops/backfill", fmt.Sprintf(`{"since":%q}`, start.Format(time.RFC3339)))
	if a.status != http.StatusOK {
		t.Fatalf("backfill: %d %s", a.status, a.body)
	}
	if !strings.Contains(a.body, `"requeued":1`) {
		t.Fatalf("backfill report %s: want one event requeued", a.body)
	}
	eventually(t, 30*time.Second, "the relay delivers the requeue to the webhook queue", func() bool {
		_, err := s.store.Get(ctx, outbox.Table, backfill.RequeueID(eventID), "")
		return errors.Is(err, store.ErrNotFound) && !queueEmpty(s, webhookQueue)
	})
	if p := call(t, "GET", s.APIURL()+"/payments/"+missing, "", ""); p.status != http.StatusNotFound {
		t.Fatalf("the missing payment: %d %s", p.status, p.body)
	}
}
