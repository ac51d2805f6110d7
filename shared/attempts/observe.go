package attempts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// The observers below turn the Stripe adapter's exchanges and the webhook ingest's deliveries
// into Attempts; the local stack and the Lambda functions wire the same ones.

// recordTimeout bounds the attempt-log write of a provider call.
const recordTimeout = 2 * time.Second

// StripeObserver puts every Stripe call into the attempt log: wire it as
// stripeprovider.Client.Observer.
type StripeObserver struct{ Record RecordFunc }

var _ provider.Observer = StripeObserver{}

// Observe implements provider.Observer (stripeprovider.Observer).
func (c StripeObserver) Observe(ctx context.Context, call provider.Call) {
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
	a.Result = resultOf(call.StatusCode, call.Err)
	// File the call under every id it concerns, from what we sent when nothing came back: a
	// timed-out or reset create has no response, but its request carried our payment id.
	form := formOf(call.RequestBody)
	resp := intentIn(call.ResponseBody)
	a.PaymentID = firstOf(a.PaymentID, resp.Metadata["twice_payment_id"], form.Get("metadata[twice_payment_id]"))
	a.Invoice = firstOf(resp.Metadata["twice_invoice"], form.Get("metadata[twice_invoice]"))
	a.ProviderPaymentID = firstOf(resp.ID, intentIDInPath(call.Path))
	a.CardBrand, a.CardLast4 = cardIn(call.ResponseBody)
	a.Livemode = livemodeIn(call.ResponseBody)
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

func resultOf(status int, err error) string {
	switch {
	case err != nil && status == 0 && isReset(err):
		return ResultReset
	case err != nil && status == 0:
		return ResultTimeout
	case status >= 200 && status < 300:
		return ResultOK
	case status == http.StatusPaymentRequired:
		return ResultDeclined
	case status == http.StatusTooManyRequests:
		return ResultRateLimited
	case status >= 500:
		return ResultServerError
	case status >= 400:
		return ResultRejected
	}
	return ResultError
}

// isReset tells a connection that broke after the request went out from a timeout: both leave
// the outcome unknown, but an operator reading the log wants to know which.
func isReset(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") || strings.HasSuffix(msg, ": EOF")
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// formOf parses a form-encoded request body; a body that is not one gives no values.
func formOf(body []byte) url.Values {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return url.Values{}
	}
	return v
}

type intent struct {
	ID       string
	Metadata map[string]string
}

// intentIn reads a PaymentIntent, or the payment_intent of a card error.
func intentIn(body []byte) intent {
	var v struct {
		ID       string            `json:"id"`
		Object   string            `json:"object"`
		Metadata map[string]string `json:"metadata"`
		Error    struct {
			PaymentIntent struct {
				ID       string            `json:"id"`
				Metadata map[string]string `json:"metadata"`
			} `json:"payment_intent"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return intent{}
	}
	if v.Object == "payment_intent" || strings.HasPrefix(v.ID, "pi_") {
		return intent{ID: v.ID, Metadata: v.Metadata}
	}
	if pi := v.Error.PaymentIntent; pi.ID != "" {
		return intent{ID: pi.ID, Metadata: pi.Metadata}
	}
	return intent{}
}

type cardFacts struct {
	Brand string `json:"brand"`
	Last4 string `json:"last4"`
}

type pmFacts struct {
	Card cardFacts `json:"card"`
}

type lastError struct {
	PaymentMethod pmFacts `json:"payment_method"`
}

// cardIn finds the card's brand and last four digits in a PaymentIntent or card error: the
// error's payment method, the intent's last_payment_error, or an expanded latest_charge.
func cardIn(body []byte) (brand, last4 string) {
	var v struct {
		LastPaymentError lastError       `json:"last_payment_error"`
		LatestCharge     json.RawMessage `json:"latest_charge"`
		Error            struct {
			PaymentMethod pmFacts `json:"payment_method"`
			PaymentIntent struct {
				LastPaymentError lastError `json:"last_payment_error"`
			} `json:"payment_intent"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return "", ""
	}
	var ch struct {
		PaymentMethodDetails pmFacts `json:"payment_method_details"`
	}
	_ = json.Unmarshal(v.LatestCharge, &ch) // a charge id (not expanded) leaves it empty
	for _, c := range []cardFacts{v.Error.PaymentMethod.Card, v.Error.PaymentIntent.LastPaymentError.PaymentMethod.Card,
		v.LastPaymentError.PaymentMethod.Card, ch.PaymentMethodDetails.Card} {
		if c.Brand != "" || validLast4(c.Last4) {
			if !validLast4(c.Last4) {
				c.Last4 = ""
			}
			return c.Brand, c.Last4
		}
	}
	return "", ""
}

func validLast4(s string) bool {
	if len(s) != 4 {
		return false
	}
	for i := 0; i < 4; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// livemodeIn reads Stripe's livemode from an object or event, or from the PaymentIntent of a
// card error; nil when the body names none.
func livemodeIn(body []byte) *bool {
	var v struct {
		Livemode *bool `json:"livemode"`
		Error    struct {
			PaymentIntent struct {
				Livemode *bool `json:"livemode"`
			} `json:"payment_intent"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	if v.Livemode != nil {
		return v.Livemode
	}
	return v.Error.PaymentIntent.Livemode
}

// intentIDInPath finds pi_... in /v1/payment_intents/{id}[/confirm].
func intentIDInPath(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/payment_intents/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	id, _, _ = strings.Cut(id, "?")
	return id
}

// IngestObserver puts every webhook delivery, accepted or not, into the attempt log: wire it
// as ingest.Handler.Observer. A verified delivery is filed under its event id and the payment
// it concerns; a refused one is quarantined (Attempt.Refused) and never filed under the ids it
// claims.
type IngestObserver struct{ Record RecordFunc }

var _ ingest.Observer = IngestObserver{}

// Observe implements ingest.Observer.
func (i IngestObserver) Observe(ctx context.Context, in ingest.Receipt) {
	a := Attempt{
		Direction: Inbound, Provider: in.Provider, Operation: "webhook " + in.Provider,
		Method: http.MethodPost, Path: "/webhooks/" + in.Provider, RequestHeader: redact.Header(in.Header),
		RequestBody: string(in.Body), Status: in.Status, StartedAt: in.ReceivedAt, Duration: in.Duration,
		EventID: in.EventID, Result: ResultOK, Source: in.Source,
		CorrelationID: firstOf(in.Header.Get("X-Request-Id"), in.Header.Get("X-Correlation-Id")),
	}
	if in.Body != nil {
		sum := sha256.Sum256(in.Body)
		a.BodySHA256 = hex.EncodeToString(sum[:])
	}
	if in.Err != nil {
		a.Err = in.Err.Error()
		a.Result = ResultRejected
		if in.Status == http.StatusBadRequest {
			a.Result = ResultRejectedSignature
		}
	}
	obj := objectInEvent(in.Body)
	if in.EventID == "" {
		// Not verified: anyone could have sent it, so the ids it claims are counted, never
		// filed under (ingest sets EventID only once the signature checked out).
		a.Refused = true
		a.Claimed = []string{claimedEventID(in), obj.Metadata["twice_payment_id"], obj.ID}
		i.Record(ctx, a)
		return
	}
	a.PaymentID = obj.Metadata["twice_payment_id"]
	a.Livemode = livemodeIn(in.Body)
	a.Invoice = obj.Metadata["twice_invoice"]
	if strings.HasPrefix(obj.ID, "pi_") {
		a.ProviderPaymentID = obj.ID
	}
	i.Record(ctx, a)
}

func claimedEventID(in ingest.Receipt) string {
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

func objectInEvent(body []byte) intent {
	var ev struct {
		Data struct {
			Object struct {
				ID            string            `json:"id"`
				Metadata      map[string]string `json:"metadata"`
				PaymentIntent string            `json:"payment_intent"`
			} `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return intent{}
	}
	o := ev.Data.Object
	if o.PaymentIntent != "" { // a charge: file it under its PaymentIntent
		return intent{ID: o.PaymentIntent, Metadata: o.Metadata}
	}
	return intent{ID: o.ID, Metadata: o.Metadata}
}
