package attempts

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/stripeprovider"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// The observers below turn the Stripe adapter's exchanges and the webhook ingest's deliveries
// into Attempts; the local stack and the Lambda functions wire the same ones.

// recordTimeout bounds the attempt-log write of a provider call.
const recordTimeout = 2 * time.Second

// StripeObserver puts every Stripe call into the attempt log: wire it as
// stripeprovider.Config.Observer.
type StripeObserver struct{ Record RecordFunc }

var _ stripeprovider.Observer = StripeObserver{}

// Observe implements stripeprovider.Observer.
func (c StripeObserver) Observe(ctx context.Context, call stripeprovider.Call) {
	a := Attempt{
		Direction: Outbound, Provider: "stripe", Operation: operation(call.Method, call.Path),
		Method: call.Method, Path: call.Path, RequestBody: string(call.RequestBody),
		RequestHeader: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		Status:        call.StatusCode, ResponseBody: string(call.ResponseBody),
		StartedAt: call.Started, Duration: call.Duration, IdempotencyKey: call.IdempotencyKey,
		PaymentID: PaymentIDFrom(ctx), CorrelationID: call.RequestID,
		ResponseHeader: map[string]string{"Content-Type": "application/json"},
	}
	if call.Query != "" {
		a.Path += "?" + call.Query
	}
	if call.Replayed {
		a.ResponseHeader["Idempotent-Replayed"] = "true"
	}
	if call.Err != nil {
		a.Err = call.Err.Error()
	}
	a.Outcome = outcome(call.StatusCode, call.Err)
	if a.PaymentID == "" {
		a.PaymentID = paymentIDIn(call.ResponseBody)
	}
	// A timed-out call is the one an operator most needs in the log, and its context has
	// expired by now: record it under a fresh bound that keeps the call's values.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	c.Record(ctx, a)
}

// operation names a Stripe call: payment_intents.create, .confirm, .retrieve, .list.
func operation(method, path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/v1/"), "/")
	switch {
	case len(parts) == 1 && method == http.MethodPost:
		return parts[0] + ".create"
	case len(parts) == 1:
		return parts[0] + ".list"
	case len(parts) == 3:
		return parts[0] + "." + parts[2]
	case method == http.MethodGet:
		return parts[0] + ".retrieve"
	}
	return parts[0] + ".update"
}

func outcome(status int, err error) string {
	switch {
	case err != nil && status == 0:
		return OutcomeTimeout
	case status >= 200 && status < 300:
		return OutcomeOK
	case status == http.StatusPaymentRequired:
		return OutcomeDeclined
	case status == http.StatusTooManyRequests:
		return OutcomeRateLimited
	case status >= 500:
		return OutcomeServerError
	case status >= 400:
		return OutcomeRejected
	}
	return OutcomeError
}

// paymentIDIn finds our payment id in a PaymentIntent (or a card error's payment_intent), so
// provider calls can be looked up by payment id.
func paymentIDIn(body []byte) string {
	var v struct {
		Metadata map[string]string `json:"metadata"`
		Error    struct {
			PaymentIntent struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"payment_intent"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if id := v.Metadata["twice_payment_id"]; id != "" {
		return id
	}
	return v.Error.PaymentIntent.Metadata["twice_payment_id"]
}

// IngestObserver puts every webhook delivery, accepted or not, into the attempt log: wire it
// as ingest.Handler.Observer.
type IngestObserver struct{ Record RecordFunc }

var _ ingest.Observer = IngestObserver{}

// Observe implements ingest.Observer.
func (i IngestObserver) Observe(ctx context.Context, in ingest.Attempt) {
	a := Attempt{
		Direction: Inbound, Provider: in.Provider, Operation: "webhook " + in.Provider,
		Method: http.MethodPost, Path: "/webhooks/" + in.Provider, RequestHeader: RedactHeader(in.Header),
		RequestBody: string(in.Body), Status: in.Status, StartedAt: in.ReceivedAt, Duration: in.Duration,
		EventID: in.EventID, Outcome: OutcomeOK,
	}
	if in.Err != nil {
		a.Err = in.Err.Error()
		a.Outcome = OutcomeRejected
		if in.Status == http.StatusBadRequest {
			a.Outcome = OutcomeRejectedSignature
		}
	}
	if a.EventID == "" {
		// A refused delivery has no verified id; the id it claims still answers "did they
		// send it, and why did we refuse it?". Its outcome says it was refused.
		a.EventID = claimedEventID(in)
	}
	a.PaymentID = paymentIDInEvent(in.Body)
	i.Record(ctx, a)
}

func claimedEventID(in ingest.Attempt) string {
	if id := in.Header.Get("Webhook-Id"); id != "" {
		return id
	}
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(in.Body, &ev) == nil {
		return ev.ID
	}
	return ""
}

func paymentIDInEvent(body []byte) string {
	var ev struct {
		Data struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return ""
	}
	return paymentIDIn(ev.Data.Object)
}
