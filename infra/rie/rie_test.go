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
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
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
	// simulator is the provider behind sim.
	simulator *stripesim.Simulator
	// calls are the AWS actions each started function made, recorded by proxies in front of
	// DynamoDB Local and moto (see least_privilege_test.go).
	calls map[string][]*rie.Recorder
	// ran are the emulators each function ran in, for their output.
	ran map[string][]*rie.Emulator
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
	return &env{root: root, rie: rieBin, fx: fx, sim: srv, simulator: sim, calls: map[string][]*rie.Recorder{}, ran: map[string][]*rie.Emulator{}}
}

func (e *env) event(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// start builds fn for this machine (the emulator runs natively) and starts it; extra
// environment entries ("K=V") override the fixture's.
func (e *env) start(t *testing.T, fn string, extra ...string) *rie.Emulator {
	t.Helper()
	bin, err := rie.Build(t.Context(), e.root, "./functions/"+fn, runtime.GOARCH, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return e.startBuilt(t, fn, bin, extra...)
}

// startBuilt starts the built bootstrap bin of fn as start does.
func (e *env) startBuilt(t *testing.T, fn, bin string, extra ...string) *rie.Emulator {
	t.Helper()
	// Every AWS call goes through a recording proxy, so the least-privilege test sees what the
	// function really asked for.
	ddb, err := rie.NewRecorder(e.fx.DynamoDB)
	if err != nil {
		t.Fatal(err)
	}
	moto, err := rie.NewRecorder(e.fx.Moto)
	if err != nil {
		t.Fatal(err)
	}
	e.calls[fn] = append(e.calls[fn], ddb, moto)
	t.Cleanup(func() { ddb.Close(); moto.Close() })
	em, err := rie.Start(t.Context(), e.rie, bin, e.fx.Env(append([]string{"AWS_ENDPOINT_URL_DYNAMODB=" + ddb.URL,
		"AWS_ENDPOINT_URL_SQS=" + moto.URL, "AWS_ENDPOINT_URL_SSM=" + moto.URL, "AWS_ENDPOINT_URL_SFN=" + moto.URL,
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + moto.URL}, extra...)...))
	if err != nil {
		t.Fatal(err)
	}
	e.ran[fn] = append(e.ran[fn], em)
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
		// A decline is a stored 402, and recovery starts (moto's Step Functions).
		declined := edit(t, post, func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Headers["idempotency-key"] = "order-rie-declined"
			ev.Body = `{"amount":2000,"currency":"usd","customer":"cus_acme","payment_method":"pm_card_visa_chargeDeclinedInsufficientFunds"}`
			ev.IsBase64Encoded = false
		})
		if r := invokeHTTP(t, em, declined); r.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Body, "insufficient_funds") {
			t.Fatalf("declined: %d %s", r.StatusCode, r.Body)
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
			ts := time.Now().Unix() // the function under the emulator checks it against the wall clock
			mac := hmac.New(sha256.New, []byte(stripeWebhookSecret))
			fmt.Fprintf(mac, "%d.%s", ts, ev.Body)
			ev.Headers["stripe-signature"] = fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
		})
		if r := invokeHTTP(t, em, fresh); r.StatusCode != http.StatusOK {
			t.Fatalf("signed: %d %s", r.StatusCode, r.Body)
		}
		// One delivery, which a standard queue may hold twice: a send SQS served whose
		// answer was lost is sent again by the SDK's retryer (the worker deduplicates).
		out, err := sqs.NewFromConfig(e.fx.MotoConfig).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.fx.QueueURLs["webhooks"]), MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("webhook queue: %v, %d messages, want the delivery", err, len(out.Messages))
		}
		for _, m := range out.Messages {
			var d webhooks.Delivery
			if err := json.Unmarshal([]byte(*m.Body), &d); err != nil || d.EventID != "evt_1Sample" {
				t.Fatalf("queued delivery %+v: %v", d, err)
			}
		}
	})

	t.Run("webhook-worker", func(t *testing.T) {
		em := e.start(t, "webhook-worker")
		if r := invokeSQS(t, em, e.event(t, "webhook-worker/sqs-delivery.json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("failures: %+v", r.BatchItemFailures)
		}
		p, err := payments.Get(ctx, e.store(), "pay_sample")
		if err != nil || p.Status != provider.StatusSucceeded || p.ProviderPaymentID != "pi_3Sample" {
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
		// Jobs whose first call ended unknown: their keys are pending with the caller's bytes (as
		// payments-api leaves them); the resolver makes the call now, and a decline commits its
		// recovery start to the outbox with the state change.
		keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: e.store()})
		if err != nil {
			t.Fatal(err)
		}
		var jobs events.SQSEvent
		for i, pm := range map[string]string{"ok": "pm_card_visa", "declined": "pm_card_visa_chargeDeclinedInsufficientFunds"} {
			key := "order-rie-resolve-" + i
			req := []byte(`{"amount":1500,"currency":"usd","customer":"cus_acme","payment_method":"` + pm + `"}`)
			fp, err := idempotency.FingerprintJSON(req)
			if err != nil {
				t.Fatal(err)
			}
			out, err := keeper.Acquire(ctx, "jwt:client-acme", key, fp)
			if err != nil || out.Lease == nil {
				t.Fatalf("acquire %s: %+v %v", key, out, err)
			}
			if err := keeper.Pend(ctx, out.Lease, idempotency.Response{Status: 202, Body: []byte(`{"status":"pending"}`)}, req); err != nil {
				t.Fatalf("pend %s: %v", key, err)
			}
			body, _ := json.Marshal(payments.ResolveJob{Scope: "jwt:client-acme", Key: key, PaymentID: payments.PaymentID("jwt:client-acme", key)})
			jobs.Records = append(jobs.Records, events.SQSMessage{MessageId: "m-" + i, Body: string(body), EventSource: "aws:sqs",
				EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:" + e.fx.Prefix + "-resolve"})
		}
		payload, _ := json.Marshal(jobs)
		if r := invokeSQS(t, em, payload); len(r.BatchItemFailures) != 0 {
			t.Fatalf("fresh jobs: %+v", r.BatchItemFailures)
		}
		for i, want := range map[string]string{"ok": provider.StatusSucceeded, "declined": provider.StatusDeclined} {
			p, err := payments.Get(ctx, e.store(), payments.PaymentID("jwt:client-acme", "order-rie-resolve-"+i))
			if err != nil || p.Status != want {
				t.Fatalf("resolved %s: %+v (%v), want %s", i, p, err, want)
			}
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
		// An event the reconciler's backfill could not apply reaches the webhook queue (moto) as
		// the delivery the worker consumes, with its provider attribute.
		d := webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: "evt_rie_requeue", Body: []byte(`{"id":"evt_rie_requeue"}`),
			ReceivedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
		w, err := outbox.New(backfill.KindRequeue, backfill.RequeueID(d.EventID), d, d.ReceivedAt)
		if err != nil {
			t.Fatal(err)
		}
		requeue := strings.ReplaceAll(string(e.event(t, "outbox-relay/dynamodb-stream.json")), "111100000000000000000001", "333")
		requeue = strings.ReplaceAll(requeue, "recovery#pay_sample#r1", w.Put.PK)
		requeue = regexp.MustCompile(`"doc": \{"B": "[^"]*"\}`).ReplaceAllString(requeue, `"doc": {"B": "`+base64.StdEncoding.EncodeToString(w.Put.Doc)+`"}`)
		b, err = em.Invoke(ctx, []byte(requeue))
		r = events.DynamoDBEventResponse{}
		if err != nil || json.Unmarshal(b, &r) != nil || len(r.BatchItemFailures) != 0 {
			t.Fatalf("requeue: %s %v", b, err)
		}
		out, err := sqs.NewFromConfig(e.fx.MotoConfig).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.fx.QueueURLs["webhooks"]), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, m := range out.Messages {
			var got webhooks.Delivery
			if json.Unmarshal([]byte(*m.Body), &got) == nil && got.EventID == d.EventID && string(got.Body) == string(d.Body) &&
				aws.ToString(m.MessageAttributes["provider"].StringValue) == webhooks.ProviderStripe {
				found++
			}
		}
		if found != 1 {
			t.Fatalf("the requeued event is %d times on the webhook queue, want once (%d messages received)", found, len(out.Messages))
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
		table := &deadletter.Records{Store: e.store()}
		before, err := table.OpenCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"deadletter-sink/sqs-webhooks-dlq.json", "deadletter-sink/sqs-resolve-dlq.json", "deadletter-sink/sqs-reconcile-dlq.json"} {
			if r := invokeSQS(t, em, e.event(t, f)); len(r.BatchItemFailures) != 0 {
				t.Fatalf("%s: failures %+v", f, r.BatchItemFailures)
			}
		}
		after, err := table.OpenCount(ctx)
		if err != nil || after != before+3 {
			t.Fatalf("open count %d -> %d (%v), want +3", before, after, err)
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
		// A browser without a session is sent to sign in (TestConsoleLoginInAWS goes on from there).
		if r := invokeHTTP(t, em, e.event(t, "operator-api/console.json")); r.StatusCode != http.StatusSeeOther ||
			r.Headers["Location"] != "/ops/login" {
			t.Fatalf("console: %d %v", r.StatusCode, r.Headers)
		}
		anonymous := edit(t, e.event(t, "operator-api/list-deadletters.json"), func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.Authorizer = nil
		})
		if r := invokeHTTP(t, em, anonymous); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no principal: %d %s", r.StatusCode, r.Body)
		}
		// "Was this delivered?" for the payment payments-api made above.
		lookup := edit(t, e.event(t, "operator-api/list-deadletters.json"), func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/ops/attempts", "payment_id="+paymentID
		})
		if r := invokeHTTP(t, em, lookup); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "payment_intents") {
			t.Fatalf("attempt lookup for %s: %d %s", paymentID, r.StatusCode, r.Body)
		}
		// Retry the recovery record recovery-steps opened: the record, its audit and the
		// retry's outbox message are written; outbox-relay, handed the message as the outbox
		// stream hands it, starts a new round on moto's Step Functions. (The queue records'
		// targets are the sample events' queue names, which this fixture does not have.)
		page, err := (&deadletter.Records{Store: e.store()}).List(ctx, deadletter.Filter{Status: deadletter.StatusOpen, Source: deadletter.SourceRecovery})
		if err != nil || len(page.Records) == 0 {
			t.Fatalf("open recovery records: %d (%v)", len(page.Records), err)
		}
		rec := page.Records[0]
		retry := edit(t, e.event(t, "operator-api/list-deadletters.json"), func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.HTTP.Method = http.MethodPost
			ev.RawPath, ev.RawQueryString = "/ops/deadletters/"+rec.ID+"/retry", ""
			ev.Body = `{"note":"emulator retry"}`
		})
		if r := invokeHTTP(t, em, retry); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `"retried":true`) {
			t.Fatalf("retry %s (%s): %d %s", rec.ID, rec.Target.Kind, r.StatusCode, r.Body)
		}
		// Round retries+2 of the payment's recovery (ChargeNow's execution name ends -rN).
		round := "-r" + strconv.Itoa(rec.Retries+2)
		rounds := func() int {
			execs, err := sfn.NewFromConfig(e.fx.MotoConfig).ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(e.fx.StateMachine)})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, x := range execs.Executions {
				if strings.HasSuffix(aws.ToString(x.Name), round) {
					n++
				}
			}
			return n
		}
		before := rounds()
		e.relayOutbox(t, e.start(t, "outbox-relay"), deadletter.RetryMessageID(deadletter.RetryID(rec.ID, rec.Retries+1)))
		if n := rounds(); n != before+1 {
			t.Fatalf("executions ending %s: %d before the relay, %d after; want one started", round, before, n)
		}
	})

	t.Run("reconciler", func(t *testing.T) {
		em := e.start(t, "reconciler")
		// A charge the provider made that twice never recorded, inside the scheduled window
		// (it ends 5 minutes before the scheduled time): one missing_locally difference.
		var sched struct {
			ScheduledTime time.Time `json:"scheduled_time"`
		}
		if err := json.Unmarshal(e.event(t, "reconciler/scheduled.json"), &sched); err != nil {
			t.Fatal(err)
		}
		lost, _ := json.Marshal(map[string]any{"amount": 4200, "currency": "usd", "customer": "cus_lost", "webhook": false,
			"created": sched.ScheduledTime.Add(-2 * time.Hour).Unix()})
		resp, err := http.Post(e.sim.URL+"/_sim/payment_intents", "application/json", strings.NewReader(string(lost)))
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("sim: %v %v", resp, err)
		}
		resp.Body.Close()
		var first, again struct {
			RunID    string         `json:"run_id"`
			Replayed bool           `json:"replayed"`
			Opened   map[string]int `json:"opened"`
		}
		b, err := em.Invoke(ctx, e.event(t, "reconciler/scheduled.json"))
		if err != nil || json.Unmarshal(b, &first) != nil || first.RunID == "" || first.Replayed {
			t.Fatalf("scheduled run: %s %v", b, err)
		}
		if n := first.Opened["missing_locally"]; n != 1 {
			t.Fatalf("opened %v, want one missing_locally difference: %s", first.Opened, b)
		}
		// The Scheduler retrying the same scheduled time gets the stored report: run id = window.
		b, err = em.Invoke(ctx, e.event(t, "reconciler/scheduled.json"))
		if err != nil || json.Unmarshal(b, &again) != nil || again.RunID != first.RunID || !again.Replayed {
			t.Fatalf("repeated run: %s %v", b, err)
		}
		// An operator's retry of a failed run, which the relay leaves retrying (there is no
		// reconciler at hand: recon.RequeueAtNextRun), is carried out after the next pass of
		// either schedule, here the backfill's: resolved when its run completes.
		table := &deadletter.Records{Store: e.store()}
		failed, _, err := table.Open(ctx, deadletter.ReconRunFailed(e.event(t, "reconciler/explicit-window.json"),
			time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := table.Retry(ctx, failed.ID, "jwt:ops", ""); !ok || err != nil {
			t.Fatalf("retry: %v %v", ok, err)
		}
		b, err = em.Invoke(ctx, e.event(t, "reconciler/backfill.json"))
		if err != nil || strings.Contains(string(b), "errorType") {
			t.Fatalf("backfill pass: %s %v", b, err)
		}
		if got, err := table.Get(ctx, failed.ID); err != nil || got.Status != deadletter.StatusResolved {
			t.Fatalf("the retried run after a backfill pass: %s (%v), want resolved", got.Status, err)
		}
	})

	t.Run("least privilege", func(t *testing.T) { e.checkLeastPrivilege(t) })
	t.Run("alarm metrics emitted", func(t *testing.T) { e.checkMetricsEmitted(t) })
}

// checkMetricsEmitted: every function metricEmitters names printed, under the emulator, an
// EMF line with the metric in namespace Twice, with the Stage dimension and level WARN (so a
// log-level filter up to WARN keeps it).
func (e *env) checkMetricsEmitted(t *testing.T) {
	for metric, fns := range metricEmitters {
		for _, fn := range fns {
			ems, ok := e.ran[fn]
			if !ok {
				t.Errorf("%s did not run", fn)
				continue
			}
			found := false
			for _, em := range ems {
				for line := range strings.Lines(em.Output()) {
					var l struct {
						Level string `json:"level"`
						Stage string `json:"Stage"`
						AWS   struct {
							CloudWatchMetrics []struct {
								Namespace  string
								Dimensions [][]string
								Metrics    []struct{ Name string }
							}
						} `json:"_aws"`
					}
					if json.Unmarshal([]byte(line), &l) != nil || l.Level != "WARN" || l.Stage == "" {
						continue
					}
					for _, d := range l.AWS.CloudWatchMetrics {
						for _, m := range d.Metrics {
							if d.Namespace == "Twice" && m.Name == metric && len(d.Dimensions) > 0 && d.Dimensions[0][0] == "Stage" {
								found = true
							}
						}
					}
				}
			}
			if !found {
				t.Errorf("%s printed no EMF line for Twice/%s (with Stage, level WARN)", fn, metric)
			} else {
				t.Logf("%s emits Twice/%s", fn, metric)
			}
		}
	}
}
