package rie_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
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

// invokeTable is docs/invoke.md's table: sample path -> (function, documented answer).
func invokeTable(t *testing.T, root string) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "invoke.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{}
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "| `events/") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 5 {
			t.Fatalf("docs/invoke.md: a row with too few columns: %s", line)
		}
		trim := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		rows[trim(cols[1])] = [2]string{trim(cols[2]), trim(cols[3])}
	}
	return rows
}

// TestSamplesAsMakeInvokeRunsThem runs every file in events/ the way `make invoke` does
// (rie.Sample: a fresh fixture with the sample payment, the Stripe simulator, the function
// under aws-lambda-rie, the event made fresh at the wall clock) and checks the answer
// docs/invoke.md gives for it; the table lists every sample, and nothing else.
func TestSamplesAsMakeInvokeRunsThem(t *testing.T) {
	rieBin := testenv.RIE(t)
	ddb, moto := testenv.DynamoDBEndpoint(t), testenv.MotoEndpoint(t)
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	table := invokeTable(t, root)
	files, err := filepath.Glob(filepath.Join(root, "events", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		if _, ok := table[rel]; !ok {
			t.Errorf("docs/invoke.md has no row for %s", rel)
		}
	}
	if len(table) != len(files) {
		t.Errorf("docs/invoke.md has %d rows for %d samples", len(table), len(files))
	}
	built, dirs := map[string]string{}, map[string]string{}
	for _, f := range files {
		if fn := filepath.Base(filepath.Dir(f)); dirs[fn] == "" {
			dirs[fn] = t.TempDir()
		}
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		fn := filepath.Base(filepath.Dir(f))
		t.Run(strings.TrimPrefix(rel, "events/"), func(t *testing.T) {
			row := table[rel]
			if row[0] != fn {
				t.Errorf("docs/invoke.md runs %s with %q, want %s", rel, row[0], fn)
			}
			if built[fn] == "" { // each function once, kept for its other samples
				if built[fn], err = rie.Build(t.Context(), root, "./functions/"+fn, runtime.GOARCH, dirs[fn]); err != nil {
					t.Fatal(err)
				}
			}
			var progress bytes.Buffer
			res, err := rie.Sample{Root: root, RIE: rieBin, DynamoDB: ddb, Moto: moto, Fn: fn, Event: readEvent(t, strings.TrimPrefix(rel, "events/")),
				Bootstrap: built[fn], Log: &progress}.Run(t.Context())
			if err != nil {
				t.Fatalf("%v\n%s%s", err, progress.String(), res.Output)
			}
			if check := sampleEffects[rel]; check != nil {
				check(t, res.Fixture)
			}
			if got := rie.Answer(res.Response); got != row[1] {
				t.Errorf("make invoke FN=%s EVENT=%s answers %q; docs/invoke.md says %q\n%s\n%s", fn, rel, got, row[1], res.Response, res.Output)
			} else {
				t.Logf("%s -> %s %s", rel, got, strings.Join(res.Fresh, "; "))
			}
		})
	}
}

// sampleEffects check what docs/invoke.md says a sample does beyond its answer.
var sampleEffects = map[string]func(t *testing.T, fx *rie.Fixture){
	"events/webhook-ingest/stripe.json": func(t *testing.T, fx *rie.Fixture) {
		// The delivery of evt_1Sample, and nothing else. A standard queue delivers at least
		// once, and a send that SQS served but whose answer was lost is sent again by the SDK's
		// retryer, so the one delivery may be there twice: the worker deduplicates by event id.
		out, err := sqs.NewFromConfig(fx.MotoConfig).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(fx.QueueURLs["webhooks"]), MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 || slices.ContainsFunc(out.Messages, func(m sqstypes.Message) bool {
			return !strings.Contains(aws.ToString(m.Body), "evt_1Sample")
		}) {
			t.Errorf("the webhook queue: %+v (%v), want the delivery of evt_1Sample", out, err)
		}
	},
	"events/webhook-worker/sqs-delivery.json": func(t *testing.T, fx *rie.Fixture) {
		samplePaymentIs(t, fx, provider.StatusSucceeded)
	},
	"events/payments-api/get-payment.json": func(t *testing.T, fx *rie.Fixture) {
		samplePaymentIs(t, fx, provider.StatusDeclined)
	},
	"events/outbox-relay/dynamodb-stream.json": func(t *testing.T, fx *rie.Fixture) {
		out, err := sfn.NewFromConfig(fx.MotoConfig).ListExecutions(t.Context(), &sfn.ListExecutionsInput{StateMachineArn: aws.String(fx.StateMachine)})
		if err != nil || len(out.Executions) != 1 || !strings.HasSuffix(aws.ToString(out.Executions[0].Name), "-r1") {
			t.Errorf("executions: %+v (%v), want round 1 of pay_sample's recovery", out, err)
		}
	},
	"events/deadletter-sink/sqs-webhooks-dlq.json":  openRecords(1),
	"events/deadletter-sink/sqs-resolve-dlq.json":   openRecords(1),
	"events/deadletter-sink/sqs-reconcile-dlq.json": openRecords(1),
	"events/recovery-steps/dead-letter.json":        openRecords(1),
	"events/payment-resolver/sqs-resolve.json": func(t *testing.T, fx *rie.Fixture) {
		samplePaymentIs(t, fx, provider.StatusDeclined)
	},
}

func sampleStore(fx *rie.Fixture) *dynamo.Store {
	return dynamo.New(dynamo.NewClient(fx.DynamoDB), fx.Tables)
}

func samplePaymentIs(t *testing.T, fx *rie.Fixture, status string) {
	t.Helper()
	p, err := payments.Get(t.Context(), sampleStore(fx), rie.SamplePaymentID)
	if err != nil || p.Status != status {
		t.Errorf("pay_sample: %s (%v), want %s", p.Status, err, status)
	}
}

func openRecords(n int64) func(t *testing.T, fx *rie.Fixture) {
	return func(t *testing.T, fx *rie.Fixture) {
		got, err := (&deadletter.Records{Store: sampleStore(fx)}).OpenCount(t.Context())
		if err != nil || got != n {
			t.Errorf("open dead-letter records: %d (%v), want %d", got, err, n)
		}
	}
}
