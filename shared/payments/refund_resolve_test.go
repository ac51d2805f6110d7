package payments

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
)

// The refund's key-horizon rule, one case each, on the provider fake with a fake clock: the
// caller never retries, and the resolve job committed with the pending key settles it. Within
// the horizon the same provider key is sent again (one refund); after the provider forgot the
// key the refund is found by twice_refund_id and adopted (one refund, not a second); one that
// never reached the provider settles as failed, never_reached_provider, its amount refundable
// again (no refund). Each time a replay of the key then returns the outcome.
func TestPendingRefundAcrossTheKeyHorizon(t *testing.T) {
	cases := []struct {
		name        string
		afterEffect bool
		wait        time.Duration
		status      string
		refunds     int
	}{
		{"made, resolved within the horizon", true, 2 * time.Hour, provider.RefundSucceeded, 1},
		{"made, resolved after the provider forgot the key", true, 25 * time.Hour, provider.RefundSucceeded, 1},
		{"never made, resolved within the horizon", false, 2 * time.Hour, provider.RefundSucceeded, 1},
		{"never made, resolved after the provider forgot the key", false, 25 * time.Hour, provider.RefundFailed, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newPropWorld(t, t.TempDir(), 0)
			t.Cleanup(func() { w.svc.Store.(interface{ Close() error }).Close() })
			paid := w.post("order-1", propKeys["order-1"])
			var pv View
			if err := json.Unmarshal([]byte(paid.body), &pv); err != nil || pv.Status != provider.StatusSucceeded {
				t.Fatalf("create: %d %s", paid.status, paid.body)
			}
			refund := func() answer {
				r := httptest.NewRequest("POST", "/payments/"+pv.ID+"/refunds", strings.NewReader(`{"amount":500}`))
				r.Header.Set("Idempotency-Key", "refund-1")
				rec := httptest.NewRecorder()
				w.h.ServeHTTP(rec, r)
				return answer{rec.Code, rec.Body.String()}
			}
			w.prov.FailNext(1, &provider.UnknownOutcomeError{Op: "refund"}, c.afterEffect)
			if got := refund(); got.status != http.StatusAccepted || !strings.Contains(got.body, `"status":"pending"`) {
				t.Fatalf("first answer: %d %s", got.status, got.body)
			}
			if _, _, err := w.relay.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			jobs := w.q.take()
			if len(jobs) != 1 || jobs[0].Refund != RefundID("local", "refund-1") || jobs[0].Attempt != 1 {
				t.Fatalf("resolve jobs committed with the pending refund: %+v", jobs)
			}
			w.clock.Advance(c.wait)
			if c.wait > provider.StripeKeyHorizon {
				w.prov.ForgetKeys()
			}
			if err := w.svc.ResolveMessage(context.Background(), jobMessage(t, jobs[0])); err != nil {
				t.Fatal(err)
			}
			got := refund()
			var rv RefundView
			if err := json.Unmarshal([]byte(got.body), &rv); err != nil || got.status != http.StatusCreated || rv.Status != c.status {
				t.Fatalf("replay after the resolution: %d %s", got.status, got.body)
			}
			if c.status == provider.RefundFailed && (rv.FailureReason == nil || *rv.FailureReason != RefundNeverMade) {
				t.Fatalf("a refund never made: %s", got.body)
			}
			n := 0
			for range w.prov.Refunds(context.Background(), provider.RefundListParams{Payment: *pv.ProviderPaymentID}) {
				n++
			}
			led, err := GetRefunds(context.Background(), w.svc.Store, pv.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(500)
			if c.refunds == 0 {
				want = 0
			}
			if n != c.refunds || led.Held() != want {
				t.Fatalf("%d refunds at the provider, %d held locally; want %d, %d", n, led.Held(), c.refunds, want)
			}
		})
	}
}

func jobMessage(t *testing.T, job ResolveJob) queue.Message {
	t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return queue.Message{ID: "m-" + job.Refund, Body: b}
}
