package payments

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// A search that fails past the horizon decides nothing: the key stays pending (202, replayed),
// the next resolution is queued, and once the provider answers the payment is adopted.
func TestFailedSearchKeepsThePaymentPending(t *testing.T) {
	w := newPropWorld(t, t.TempDir(), 0)
	t.Cleanup(func() { w.svc.Store.(interface{ Close() error }).Close() })
	body := propKeys["order-1"]
	w.prov.FailNext(1, &provider.UnknownOutcomeError{Op: "create"}, true)
	w.post("order-1", body)
	w.clock.Advance(30 * time.Hour)
	w.prov.ForgetKeys()
	w.prov.FailSearchNext(1, &provider.TransientError{Op: "search", StatusCode: 500})
	if got := w.post("order-1", body); got.status != http.StatusAccepted || !strings.Contains(got.body, `"status":"pending"`) {
		t.Fatalf("with the search failing: %d %s", got.status, got.body)
	}
	if _, _, err := w.relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	jobs := w.q.take()
	if len(jobs) == 0 || jobs[len(jobs)-1].Attempt < 2 {
		t.Fatalf("no next resolution queued: %+v", jobs)
	}
	if err := w.svc.Resolve(context.Background(), jobs[len(jobs)-1]); err != nil {
		t.Fatal(err)
	}
	if got := w.post("order-1", body); got.status != http.StatusCreated || !strings.Contains(got.body, `"status":"succeeded"`) {
		t.Fatalf("after the search works: %d %s", got.status, got.body)
	}
	if n := w.prov.CountMetadata(MetaPaymentID, PaymentID("local", "order-1")); n != 1 {
		t.Fatalf("%d PaymentIntents", n)
	}
}

// The provider-horizon rule, one case each, on the provider fake with a fake clock: a pending
// payment resolved past Stripe's 24 h is found by twice_payment_id and adopted (one
// PaymentIntent); one that never reached the provider settles as canceled (none); inside the
// horizon the same provider key is re-sent. A different body under the pending key is 422 at
// every offset; the same bytes are never.
func TestPendingAcrossTheKeyHorizon(t *testing.T) {
	cases := []struct {
		name        string
		afterEffect bool
		wait        time.Duration
		status      int
		want        string
		intents     int
	}{
		{"charged, resolved within the horizon", true, 2 * time.Hour, 201, `"status":"succeeded"`, 1},
		{"charged, resolved after the provider forgot the key", true, 25 * time.Hour, 201, `"status":"succeeded"`, 1},
		{"never charged, resolved within the horizon", false, 2 * time.Hour, 201, `"status":"succeeded"`, 1},
		{"never charged, resolved after the horizon", false, 25 * time.Hour, 402, `"status":"canceled"`, 0},
		{"charged, resolved three days later", true, 72 * time.Hour, 201, `"status":"succeeded"`, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newPropWorld(t, t.TempDir(), 0)
			t.Cleanup(func() { w.svc.Store.(interface{ Close() error }).Close() })
			body := propKeys["order-1"]
			w.prov.FailNext(1, &provider.UnknownOutcomeError{Op: "create"}, tc.afterEffect)
			if got := w.post("order-1", body); got.status != http.StatusAccepted {
				t.Fatalf("first: %d %s", got.status, got.body)
			}
			if got := w.post("order-1", strings.Replace(body, "1500", "1501", 1)); got.status != 422 || !strings.Contains(got.body, `"amount"`) {
				t.Fatalf("different body while pending: %d %s", got.status, got.body)
			}
			w.clock.Advance(tc.wait)
			if tc.wait > provider.StripeKeyHorizon {
				w.prov.ForgetKeys() // as Stripe may, after 24 h
			}
			got := w.post("order-1", reformatted(body))
			if got.status != tc.status || !strings.Contains(got.body, tc.want) {
				t.Fatalf("after %s: %d %s", tc.wait, got.status, got.body)
			}
			again := w.post("order-1", body)
			if again != got {
				t.Fatalf("replay %v differs from %v", again, got)
			}
			if n := w.prov.CountMetadata(MetaPaymentID, PaymentID("local", "order-1")); n != tc.intents {
				t.Fatalf("%d PaymentIntents, want %d", n, tc.intents)
			}
			// The resolve job the first answer queued finds the key resolved: nothing more.
			if _, _, err := w.relay.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, j := range w.q.take() {
				if err := w.svc.Resolve(context.Background(), j); err != nil {
					t.Fatal(err)
				}
			}
			if n := w.prov.CountMetadata(MetaPaymentID, PaymentID("local", "order-1")); n != tc.intents {
				t.Fatalf("after the resolver: %d PaymentIntents", n)
			}
		})
	}
}
