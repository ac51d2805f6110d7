package rie_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/signature"
)

func readEvent(t *testing.T, name string) []byte {
	t.Helper()
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFreshSignsAndStamps: what make invoke sends at a moment long after the samples were
// written. The Stripe sample, stale as filed, verifies at that moment with the invoke's
// secret (and only with it); the scheduled reconciliation fires in the current hour; the
// recovery step runs at that moment; a Standard Webhooks delivery is signed again too; a
// sample whose handler checks no time is sent byte for byte.
func TestFreshSignsAndStamps(t *testing.T) {
	now := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC) // any later moment will do
	clock := func() time.Time { return now }

	t.Run("stripe webhook", func(t *testing.T) {
		filed := readEvent(t, "webhook-ingest/stripe.json")
		v, err := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: []string{rie.InvokeSecrets.StripeWebhookSecret}, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		verify := func(b []byte) error {
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, val := range ev.Headers {
				h.Set(k, val)
			}
			return v.Verify(h, []byte(ev.Body))
		}
		if err := verify(filed); !errors.Is(err, webhooks.ErrTooOld) {
			t.Fatalf("the filed sample at %s: %v, want ErrTooOld", now, err)
		}
		fresh, notes, err := rie.Fresh(filed, now, rie.InvokeSecrets)
		if err != nil || len(notes) != 1 {
			t.Fatalf("fresh: %v %q", err, notes)
		}
		if err := verify(fresh); err != nil {
			t.Fatalf("the fresh sample: %v", err)
		}
		other := rie.InvokeSecrets
		other.StripeWebhookSecret = "whsec_another"
		wrong, _, _ := rie.Fresh(filed, now, other)
		if err := verify(wrong); err == nil {
			t.Fatal("signed with another secret, it verified")
		}
	})

	t.Run("standard webhook", func(t *testing.T) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/webhooks/standard", Body: `{"type":"payment.succeeded"}`, Headers: map[string]string{
			"webhook-id": "msg_1", "webhook-timestamp": "1795939200", "webhook-signature": "v1,c3RhbGU="}}
		filed, _ := json.Marshal(ev)
		fresh, notes, err := rie.Fresh(filed, now, rie.InvokeSecrets)
		if err != nil || len(notes) != 1 {
			t.Fatalf("fresh: %v %q", err, notes)
		}
		v, err := signature.NewStandardVerifier(signature.StandardVerifier{Secrets: []string{rie.InvokeSecrets.StandardWebhookSecret}, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		var got events.APIGatewayV2HTTPRequest
		json.Unmarshal(fresh, &got)
		h := http.Header{}
		for k, val := range got.Headers {
			h.Set(k, val)
		}
		if err := v.Verify(h, []byte(got.Body)); err != nil {
			t.Fatalf("the fresh delivery: %v", err)
		}
	})

	t.Run("scheduled reconciliation", func(t *testing.T) {
		fresh, _, err := rie.Fresh(readEvent(t, "reconciler/scheduled.json"), now, rie.InvokeSecrets)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := recon.ParseEvent(fresh)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ev.Window(now, 25, 5*time.Minute)
		if err != nil || !w.To.Equal(time.Date(2031, 2, 3, 3, 55, 0, 0, time.UTC)) {
			t.Fatalf("window %+v (%v), want one ending at 03:55, five minutes before the current hour", w, err)
		}
	})

	t.Run("recovery step", func(t *testing.T) {
		for _, f := range []string{"recovery-steps/plan.json", "recovery-steps/dead-letter.json"} {
			fresh, _, err := rie.Fresh(readEvent(t, f), now, rie.InvokeSecrets)
			var in struct {
				Now   time.Time       `json:"now"`
				Step  string          `json:"step"`
				State json.RawMessage `json:"state"`
			}
			if err != nil || json.Unmarshal(fresh, &in) != nil || !in.Now.Equal(now) || in.Step == "" || len(in.State) == 0 {
				t.Fatalf("%s: %s (%v)", f, fresh, err)
			}
		}
	})

	t.Run("nothing to refresh", func(t *testing.T) {
		for _, f := range []string{"webhook-worker/sqs-delivery.json", "outbox-relay/dynamodb-stream.json", "reconciler/explicit-window.json",
			"reconciler/backfill.json", "payments-api/post-payment.json", "deadletter-sink/sqs-webhooks-dlq.json", "operator-api/list-deadletters.json"} {
			filed := readEvent(t, f)
			fresh, notes, err := rie.Fresh(filed, now, rie.InvokeSecrets)
			if err != nil || !bytes.Equal(fresh, filed) || len(notes) != 0 {
				t.Errorf("%s changed: %q %v", f, notes, err)
			}
		}
	})
}
