package rie_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/webhooks"
)

const stripeWebhookSecret = "whsec_c2FtcGxlLWV2ZW50LXNlY3JldA"

// env is what every emulator test needs: the module root, the emulator binary, the local
// servers, a fixture and the provider simulator it points at.
type env struct {
	root string
	rie  string
	fx   *rie.Fixture
	sim  *httptest.Server
}

func setup(t *testing.T) *env {
	t.Helper()
	rieBin := testenv.RIE(t)
	ddb := testenv.DynamoDBEndpoint(t)
	moto := testenv.MotoEndpoint(t)
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir(), APIKeys: []string{stripesim.DefaultAPIKey}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); sim.Close() })
	prefix := "rie-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	fx, err := rie.NewFixture(t.Context(), root, prefix, ddb, moto, srv.URL, rie.Secrets{
		StripeAPIKey: stripesim.DefaultAPIKey, StripeWebhookSecret: stripeWebhookSecret,
		StandardWebhookSecret: "whsec_dHdpY2UtbG9jYWwtc3RhbmRhcmQtc2VjcmV0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{root: root, rie: rieBin, fx: fx, sim: srv}
}

func (e *env) event(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// start builds fn for this machine (the emulator runs natively) and starts it.
func (e *env) start(t *testing.T, fn string) *rie.Emulator {
	t.Helper()
	bin, err := rie.Build(t.Context(), e.root, "./functions/"+fn, runtime.GOARCH, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	em, err := rie.Start(t.Context(), e.rie, bin, e.fx.Env())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		em.Close()
		if t.Failed() {
			t.Logf("%s output:\n%s", fn, em.Output())
		}
	})
	return em
}

func invokeHTTP(t *testing.T, em *rie.Emulator, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	b, err := em.Invoke(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(b, &resp); err != nil || resp.StatusCode == 0 {
		t.Fatalf("not an HTTP API response: %s (%v)", b, err)
	}
	return resp
}

func invokeSQS(t *testing.T, em *rie.Emulator, payload []byte) events.SQSEventResponse {
	t.Helper()
	b, err := em.Invoke(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(b, &resp); err != nil || strings.Contains(string(b), "errorType") {
		t.Fatalf("not an SQS batch response: %s (%v)", b, err)
	}
	return resp
}

// edit rewrites an HTTP API event through f.
func edit(t *testing.T, b []byte, f func(ev *events.APIGatewayV2HTTPRequest)) []byte {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	f(&ev)
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) store() *dynamo.Store {
	return dynamo.New(dynamo.NewClient(e.fx.DynamoDB), e.fx.Tables)
}

// TestFunctionsUnderEmulator is `sam local invoke` for every function with its events/ files:
// the real bootstrap, the real runtime API, DynamoDB Local and moto behind the SDK.
func TestFunctionsUnderEmulator(t *testing.T) {
	e := setup(t)
	ctx := t.Context()

	var paymentID string
	t.Run("payments-api", func(t *testing.T) {
		em := e.start(t, "payments-api")
		if r := invokeHTTP(t, em, e.event(t, "payments-api/post-payment-no-key.json")); r.StatusCode != http.StatusBadRequest ||
			r.Headers["Content-Type"] != "application/problem+json" {
			t.Fatalf("missing key: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
		post := e.event(t, "payments-api/post-payment.json")
		first := invokeHTTP(t, em, post)
		if first.StatusCode != http.StatusCreated || !strings.Contains(first.Body, `"status":"succeeded"`) {
			t.Fatalf("create: %d %s", first.StatusCode, first.Body)
		}
		again := invokeHTTP(t, em, post)
		if again.StatusCode != first.StatusCode || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("replay: %d %v %s", again.StatusCode, again.Headers, again.Body)
		}
		var view struct{ ID string }
		json.Unmarshal([]byte(first.Body), &view)
		paymentID = view.ID
		get := edit(t, e.event(t, "payments-api/get-payment.json"), func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RequestContext.HTTP.Path, ev.PathParameters["id"] = "/payments/"+view.ID, "/payments/"+view.ID, view.ID
		})
		if r := invokeHTTP(t, em, get); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, view.ID) {
			t.Fatalf("get %s: %d %s", view.ID, r.StatusCode, r.Body)
		}
		if r := invokeHTTP(t, em, e.event(t, "payments-api/get-payment.json")); r.StatusCode != http.StatusNotFound {
			t.Fatalf("get unknown: %d %s", r.StatusCode, r.Body)
		}
		anonymous := edit(t, post, func(ev *events.APIGatewayV2HTTPRequest) { ev.RequestContext.Authorizer = nil })
		if r := invokeHTTP(t, em, anonymous); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no principal: %d %s", r.StatusCode, r.Body)
		}
	})

	t.Run("webhook-ingest", func(t *testing.T) {
		em := e.start(t, "webhook-ingest")
		stale := e.event(t, "webhook-ingest/stripe.json")
		if r := invokeHTTP(t, em, stale); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("stale signature: %d %s", r.StatusCode, r.Body)
		}
		fresh := edit(t, stale, func(ev *events.APIGatewayV2HTTPRequest) {
			ts := time.Now().Unix()
			mac := hmac.New(sha256.New, []byte(stripeWebhookSecret))
			fmt.Fprintf(mac, "%d.%s", ts, ev.Body)
			ev.Headers["stripe-signature"] = fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
		})
		if r := invokeHTTP(t, em, fresh); r.StatusCode != http.StatusOK {
			t.Fatalf("signed: %d %s", r.StatusCode, r.Body)
		}
		out, err := sqs.NewFromConfig(e.fx.MotoConfig).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.fx.QueueURLs["webhooks"]), MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("webhook queue: %v, %d messages, want 1", err, len(out.Messages))
		}
		var d webhooks.Delivery
		if err := json.Unmarshal([]byte(*out.Messages[0].Body), &d); err != nil || d.EventID != "evt_1Sample" {
			t.Fatalf("queued delivery %+v: %v", d, err)
		}
	})

	t.Run("webhook-worker", func(t *testing.T) {
		em := e.start(t, "webhook-worker")
		if r := invokeSQS(t, em, e.event(t, "webhook-worker/sqs-delivery.json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("failures: %+v", r.BatchItemFailures)
		}
		p, err := payments.Get(ctx, e.store(), "pay_sample")
		if err != nil || p.Status != payments.StatusSucceeded || p.ProviderPaymentID != "pi_3Sample" {
			t.Fatalf("payment after the event: %+v, %v", p, err)
		}
		// The same delivery again is a duplicate: applied once, still no failure.
		if r := invokeSQS(t, em, e.event(t, "webhook-worker/sqs-delivery.json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("duplicate: %+v", r.BatchItemFailures)
		}
	})

	t.Run("payment-resolver", func(t *testing.T) {
		em := e.start(t, "payment-resolver")
		// The job's key was completed by payments-api above: the resolve finds a replay.
		if r := invokeSQS(t, em, e.event(t, "payment-resolver/sqs-resolve.json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("failures: %+v", r.BatchItemFailures)
		}
		bad := `{"Records":[{"messageId":"m-bad","body":"not json","eventSource":"aws:sqs"}]}`
		if r := invokeSQS(t, em, []byte(bad)); len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "m-bad" {
			t.Fatalf("undecodable job: %+v", r.BatchItemFailures)
		}
	})

	t.Run("outbox-relay", func(t *testing.T) {
		em := e.start(t, "outbox-relay")
		// pay_sample exists (the webhook above applied it, succeeded): the recovery start is
		// delivered (nothing to recover) and the message marked done.
		b, err := em.Invoke(ctx, e.event(t, "outbox-relay/dynamodb-stream.json"))
		var r events.DynamoDBEventResponse
		if err != nil || json.Unmarshal(b, &r) != nil || strings.Contains(string(b), "errorType") || len(r.BatchItemFailures) != 0 {
			t.Fatalf("stream batch: %s %v", b, err)
		}
		// A message for a payment that does not exist is reported by its sequence number, never
		// dropped.
		missing := strings.ReplaceAll(string(e.event(t, "outbox-relay/dynamodb-stream.json")), "111100000000000000000001", "222")
		missing = strings.Replace(missing, `"pk": {"S": "recovery#pay_sample#r1"},
          "doc"`, `"pk": {"S": "recovery#pay_missing#r1"},
          "doc"`, 1)
		doc := base64.StdEncoding.EncodeToString([]byte(`{"id":"recovery#pay_missing#r1","kind":"start_recovery","payload":{"payment_id":"pay_missing","round":1},"created_at":"2026-12-01T09:00:00Z"}`))
		missing = regexp.MustCompile(`"doc": \{"B": "[^"]*"\}`).ReplaceAllString(missing, `"doc": {"B": "`+doc+`"}`)
		b, err = em.Invoke(ctx, []byte(missing))
		r = events.DynamoDBEventResponse{}
		if err != nil || json.Unmarshal(b, &r) != nil || len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "222" {
			t.Fatalf("missing payment: %s %v", b, err)
		}
		// The schedule's sweep of messages the stream left behind (none here) answers counts.
		if b, err := em.Invoke(ctx, []byte(`{"source":"aws.scheduler"}`)); err != nil || string(b) != `{"delivered":0,"failed":0}` {
			t.Fatalf("sweep: %s %v", b, err)
		}
	})

	t.Run("recovery-steps", func(t *testing.T) {
		em := e.start(t, "recovery-steps")
		b, err := em.Invoke(ctx, e.event(t, "recovery-steps/plan.json"))
		if err != nil || !strings.Contains(string(b), `"payment_id":"pay_sample"`) || strings.Contains(string(b), "errorType") {
			t.Fatalf("plan: %s %v", b, err)
		}
		b, err = em.Invoke(ctx, e.event(t, "recovery-steps/dead-letter.json"))
		var res struct{ ID string }
		if err != nil || json.Unmarshal(b, &res) != nil || res.ID == "" {
			t.Fatalf("dead_letter: %s %v", b, err)
		}
		// An invalid input reaches Step Functions under its Retry/Catch name.
		b, _ = em.Invoke(ctx, []byte(`{"step":"plan","state":{}}`))
		if !strings.Contains(string(b), `"errorType":"Recovery.Invalid"`) {
			t.Fatalf("invalid input: %s", b)
		}
	})

	t.Run("deadletter-sink", func(t *testing.T) {
		em := e.start(t, "deadletter-sink")
		table := deadletter.NewTable(e.store(), nil)
		before, err := table.OpenCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"deadletter-sink/sqs-webhooks-dlq.json", "deadletter-sink/sqs-resolve-dlq.json"} {
			if r := invokeSQS(t, em, e.event(t, f)); len(r.BatchItemFailures) != 0 {
				t.Fatalf("%s: failures %+v", f, r.BatchItemFailures)
			}
		}
		after, err := table.OpenCount(ctx)
		if err != nil || after != before+2 {
			t.Fatalf("open count %d -> %d (%v), want +2", before, after, err)
		}
		if !strings.Contains(em.Output(), `"DeadLetterOpen":`) {
			t.Fatalf("no EMF open-count line in the output:\n%s", em.Output())
		}
	})
	_ = paymentID

	t.Run("operator-api", func(t *testing.T) {
		em := e.start(t, "operator-api")
		r := invokeHTTP(t, em, e.event(t, "operator-api/list-deadletters.json"))
		// The sink and recovery-steps above opened records: the operator sees them.
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "pay_sample") {
			t.Fatalf("list: %d %s", r.StatusCode, r.Body)
		}
		if r := invokeHTTP(t, em, e.event(t, "operator-api/console.json")); r.StatusCode != http.StatusOK ||
			!strings.HasPrefix(r.Headers["Content-Type"], "text/html") {
			t.Fatalf("console: %d %v", r.StatusCode, r.Headers)
		}
		anonymous := edit(t, e.event(t, "operator-api/list-deadletters.json"), func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = nil
		})
		if r := invokeHTTP(t, em, anonymous); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no principal: %d %s", r.StatusCode, r.Body)
		}
	})

	t.Run("reconciler", func(t *testing.T) {
		em := e.start(t, "reconciler")
		var first, again struct {
			RunID    string `json:"run_id"`
			Replayed bool   `json:"replayed"`
		}
		b, err := em.Invoke(ctx, e.event(t, "reconciler/scheduled.json"))
		if err != nil || json.Unmarshal(b, &first) != nil || first.RunID == "" || first.Replayed {
			t.Fatalf("scheduled run: %s %v", b, err)
		}
		// The Scheduler retrying the same scheduled time gets the stored report: run id = window.
		b, err = em.Invoke(ctx, e.event(t, "reconciler/scheduled.json"))
		if err != nil || json.Unmarshal(b, &again) != nil || again.RunID != first.RunID || !again.Replayed {
			t.Fatalf("repeated run: %s %v", b, err)
		}
	})
}
