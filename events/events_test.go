package events_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// strict decodes like the handler would, but refuses fields the Go type lacks, so a typo in a
// sample fails here instead of being silently ignored.
func strict(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode into %T: %v", v, err)
	}
}

func httpEvent(t *testing.T, b []byte, wantRoute string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	strict(t, b, &ev)
	if ev.Version != "2.0" || ev.RouteKey != wantRoute || ev.RequestContext.HTTP.Path != ev.RawPath {
		t.Fatalf("not an HTTP API 2.0 event for %s: version %q route %q path %q/%q", wantRoute, ev.Version, ev.RouteKey, ev.RawPath, ev.RequestContext.HTTP.Path)
	}
	return ev
}

func sqsEvent(t *testing.T, b []byte, queueSuffix string, body func(t *testing.T, body []byte)) {
	t.Helper()
	var ev events.SQSEvent
	strict(t, b, &ev)
	if len(ev.Records) == 0 {
		t.Fatal("no records")
	}
	for _, r := range ev.Records {
		if r.MessageId == "" || r.EventSource != "aws:sqs" || !strings.HasSuffix(r.EventSourceARN, queueSuffix) {
			t.Fatalf("record %+v: want a message id and a source ending %s", r, queueSuffix)
		}
		// What the function's per-message func gets (sqsbatch): the system attributes read.
		if m := sqsbatch.Message(r); m.ReceiveCount < 1 || m.SentAt.IsZero() || m.Source != r.EventSourceARN {
			t.Fatalf("record %s as a message: receive count %d, sent %v, source %q", r.MessageId, m.ReceiveCount, m.SentAt, m.Source)
		}
		body(t, []byte(r.Body))
	}
}

func delivery(t *testing.T, b []byte) {
	var d webhooks.Delivery
	strict(t, b, &d)
	if _, err := webhooks.Decode(d); err != nil {
		t.Fatalf("delivery body does not decode as an event: %v", err)
	}
}

func resolveJob(t *testing.T, b []byte) {
	var j payments.ResolveJob
	strict(t, b, &j)
	if j.Key == "" || j.Scope == "" || j.PaymentID == "" {
		t.Fatalf("resolve job %+v: want a scope, a key and a payment id", j)
	}
}

// parsers maps each file (relative to events/) to the check of its handler's type.
var parsers = map[string]func(t *testing.T, b []byte){
	"payments-api/post-payment.json": func(t *testing.T, b []byte) {
		ev := httpEvent(t, b, "POST /payments")
		if ev.Headers["idempotency-key"] == "" || ev.RequestContext.Authorizer.JWT.Claims["sub"] == "" {
			t.Fatal("want an Idempotency-Key and a JWT sub")
		}
		if _, err := payments.ParseCreateRequest([]byte(ev.Body)); err != nil {
			t.Fatal(err)
		}
	},
	"payments-api/post-payment-no-key.json": func(t *testing.T, b []byte) {
		if ev := httpEvent(t, b, "POST /payments"); ev.Headers["idempotency-key"] != "" {
			t.Fatal("this sample must lack the key")
		}
	},
	"payments-api/get-payment.json": func(t *testing.T, b []byte) {
		if ev := httpEvent(t, b, "GET /payments/{id}"); ev.PathParameters["id"] == "" {
			t.Fatal("no id")
		}
	},
	"webhook-ingest/stripe.json": func(t *testing.T, b []byte) {
		ev := httpEvent(t, b, "POST /webhooks/{provider}")
		if ev.RequestContext.Authorizer != nil || ev.Headers["stripe-signature"] == "" {
			t.Fatal("want a signed, unauthenticated delivery")
		}
		delivery(t, mustJSON(t, webhooks.Delivery{Provider: "stripe", Body: []byte(ev.Body)}))
	},
	"webhook-worker/sqs-delivery.json":      func(t *testing.T, b []byte) { sqsEvent(t, b, "-webhooks", delivery) },
	"payment-resolver/sqs-resolve.json":     func(t *testing.T, b []byte) { sqsEvent(t, b, "-resolve", resolveJob) },
	"deadletter-sink/sqs-webhooks-dlq.json": func(t *testing.T, b []byte) { sqsEvent(t, b, "-webhooks-dlq", delivery) },
	"deadletter-sink/sqs-resolve-dlq.json":  func(t *testing.T, b []byte) { sqsEvent(t, b, "-resolve-dlq", resolveJob) },
	"deadletter-sink/sqs-reconcile-dlq.json": func(t *testing.T, b []byte) {
		sqsEvent(t, b, "-reconcile-dlq", func(t *testing.T, body []byte) {
			var rec struct {
				RequestContext  struct{ Condition string }    `json:"requestContext"`
				RequestPayload  json.RawMessage               `json:"requestPayload"`
				ResponsePayload struct{ ErrorMessage string } `json:"responsePayload"`
			}
			if err := json.Unmarshal(body, &rec); err != nil || rec.RequestContext.Condition == "" || rec.ResponsePayload.ErrorMessage == "" {
				t.Fatalf("not a Lambda on-failure destination record: %v", err)
			}
			reconEvent(t, rec.RequestPayload)
		})
	},
	"recovery-steps/plan.json":        func(t *testing.T, b []byte) { step(t, b, recovery.StepPlan) },
	"recovery-steps/dead-letter.json": func(t *testing.T, b []byte) { step(t, b, recovery.StepDeadLetter) },
	"operator-api/list-deadletters.json": func(t *testing.T, b []byte) {
		ev := httpEvent(t, b, "ANY /ops/deadletters")
		if ev.RequestContext.Authorizer.JWT.Claims["sub"] == "" || ev.PathParameters["proxy"] == "" {
			t.Fatal("want an operator's JWT and the proxy path")
		}
	},
	"operator-api/console.json": func(t *testing.T, b []byte) {
		// A browser's navigation: the console route has no authorizer; the function's own
		// session (OIDC sign-in) is what lets it in.
		if ev := httpEvent(t, b, "GET /ops"); ev.RequestContext.Authorizer != nil || ev.Headers["authorization"] != "" {
			t.Fatal("want a navigation with no bearer token and no authorizer")
		}
	},
	"outbox-relay/dynamodb-stream.json": func(t *testing.T, b []byte) {
		var ev events.DynamoDBEvent
		strict(t, b, &ev)
		for _, r := range ev.Records {
			img := r.Change.NewImage
			m, err := outbox.Decode(store.Item{PK: img["pk"].String(), Doc: img["doc"].Binary()})
			if err != nil || r.EventName != "INSERT" || r.Change.SequenceNumber == "" || m.Kind != payments.KindStartRecovery {
				t.Fatalf("stream record %+v: %+v, %v", r, m, err)
			}
		}
	},
	"reconciler/scheduled.json":       reconEvent,
	"reconciler/explicit-window.json": reconEvent,
	"reconciler/backfill.json": func(t *testing.T, b []byte) {
		var in backfill.Input
		strict(t, b, &in)
		if in.Backfill == nil {
			t.Fatal("want a backfill request")
		}
		if in.Backfill.Since != "" || in.Backfill.UndeliveredOnly {
			t.Fatalf("the schedule's input is the pass from the checkpoint, not %+v", *in.Backfill)
		}
	},
}

func step(t *testing.T, b []byte, want string) {
	var in recovery.StepInput
	strict(t, b, &in)
	if in.Step != want || in.State.PaymentID == "" || in.State.Round < 1 || in.State.Charges == nil || in.Now.IsZero() {
		t.Fatalf("step input %+v", in)
	}
}

func reconEvent(t *testing.T, b []byte) {
	ev, err := recon.ParseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ScheduledTime == "" && ev.From == "" {
		t.Fatalf("event %+v names no time", ev)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEveryEventParsesIntoItsHandlerType(t *testing.T) {
	files, err := filepath.Glob("*/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			parse, ok := parsers[filepath.ToSlash(f)]
			if !ok {
				t.Fatal("no parser for this file: add one to parsers")
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parse(t, b)
		})
		seen[filepath.ToSlash(f)] = true
	}
	for f := range parsers {
		if !seen[f] {
			t.Errorf("%s is listed but missing", f)
		}
	}
}

// TestEveryFunctionHasAnEvent keeps events/ in step with functions/.
func TestEveryFunctionHasAnEvent(t *testing.T) {
	dirs, err := os.ReadDir("../functions")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "internal" {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(d.Name(), "*.json")); len(m) == 0 {
			t.Errorf("functions/%s has no sample in events/%s/", d.Name(), d.Name())
		}
	}
}
