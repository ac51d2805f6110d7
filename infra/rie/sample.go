package rie

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// InvokeSecrets are the secrets `make invoke` stores in its parameters (and that Fresh signs
// with): local samples only, never a deployment's.
var InvokeSecrets = Secrets{
	StripeAPIKey:          stripesim.DefaultAPIKey,
	StripeWebhookSecret:   "whsec_c2FtcGxlLWV2ZW50LXNlY3JldA",
	StandardWebhookSecret: "whsec_dHdpY2UtbG9jYWwtc3RhbmRhcmQtc2VjcmV0",
}

// Fresh returns event as `make invoke` sends it at now. The files in events/ are fixed (they
// stay valid input for `sam local invoke -e`), but some of what they carry is checked against
// the clock by the handler, and a sample signed or stamped once would be refused or planned in
// the past:
//   - an HTTP API event with a Stripe-Signature header (webhook-ingest) is signed again at now
//     with sec's Stripe webhook secret (the ingest refuses a timestamp outside +/-300 s), and one
//     with Standard Webhooks headers is signed again with sec's standard secret;
//   - a reconciler event's scheduled_time (the Scheduler's <aws.scheduler.scheduled-time>)
//     becomes the current hour: the window ends before it and must not end in the future;
//   - a recovery-steps input's now (the state machine's entered time) becomes now: plans are
//     made from it.
//
// Everything else is left as it is: the SQS, stream and dead-letter samples carry times the
// handlers only record (SentTimestamp, received_at, ApproximateCreationDateTime), an explicit
// reconciliation window is fixed on purpose, and the JWT claims were checked by API Gateway
// before the function runs. notes says what was changed.
func Fresh(event []byte, now time.Time, sec Secrets) (out []byte, notes []string, err error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(event, &doc); err != nil {
		return event, nil, nil // not an object: nothing this knows how to refresh
	}
	changed := false
	if raw, ok := doc["headers"]; ok {
		var headers map[string]string
		if json.Unmarshal(raw, &headers) == nil {
			body, err := httpBody(doc)
			if err != nil {
				return nil, nil, err
			}
			if n := resign(headers, body, now, sec); n != "" {
				doc["headers"], _ = json.Marshal(headers)
				notes, changed = append(notes, n), true
			}
		}
	}
	if raw, ok := doc["scheduled_time"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil && !strings.HasPrefix(s, "<aws.scheduler.") {
			at := now.UTC().Truncate(time.Hour).Format(time.RFC3339)
			doc["scheduled_time"], _ = json.Marshal(at)
			notes, changed = append(notes, "scheduled_time "+s+" -> "+at), true
		}
	}
	if _, step := doc["step"]; step {
		if raw, ok := doc["now"]; ok {
			var s string
			_ = json.Unmarshal(raw, &s)
			at := now.UTC().Format(time.RFC3339Nano)
			doc["now"], _ = json.Marshal(at)
			notes, changed = append(notes, "now "+s+" -> "+at), true
		}
	}
	if !changed {
		return event, nil, nil
	}
	out, err = json.Marshal(doc)
	return out, notes, err
}

// httpBody is an HTTP API event's body as the function will see it.
func httpBody(doc map[string]json.RawMessage) ([]byte, error) {
	var body string
	var b64 bool
	_ = json.Unmarshal(doc["body"], &body)
	_ = json.Unmarshal(doc["isBase64Encoded"], &b64)
	if !b64 {
		return []byte(body), nil
	}
	return base64.StdEncoding.DecodeString(body)
}

// resign signs body again at now in whichever webhook scheme headers carry, and says what it
// did ("" when neither).
func resign(headers map[string]string, body []byte, now time.Time, sec Secrets) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	for k := range headers {
		switch strings.ToLower(k) {
		case "stripe-signature":
			secret, _, _ := strings.Cut(sec.StripeWebhookSecret, ",")
			m := hmac.New(sha256.New, []byte(secret))
			m.Write([]byte(ts + "." + string(body)))
			headers[k] = "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
			return "Stripe-Signature signed at t=" + ts + " with the invoke's webhook secret"
		case "webhook-signature":
			secret, _, _ := strings.Cut(sec.StandardWebhookSecret, ",")
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			if err != nil {
				return ""
			}
			id := header(headers, "webhook-id")
			m := hmac.New(sha256.New, key)
			m.Write([]byte(id + "." + ts + "." + string(body)))
			headers[k] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
			for h := range headers {
				if strings.EqualFold(h, "webhook-timestamp") {
					headers[h] = ts
				}
			}
			return "webhook-signature signed at " + ts + " with the invoke's standard secret"
		}
	}
	return ""
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// Sample is one `make invoke`: a fresh fixture on the local servers, the Stripe simulator on
// loopback, the function built for this machine and run under aws-lambda-rie, and the event
// made Fresh at Now.
type Sample struct {
	Root               string // the module root
	RIE                string // the aws-lambda-rie binary
	DynamoDB, Moto     string // the servers' endpoints
	Fn                 string // the directory under functions/
	Event              []byte
	Bootstrap          string           // Fn already built (a test builds each function once); built when empty
	Now                func() time.Time // default time.Now
	Log                io.Writer        // progress lines; default os.Stderr
	DisableFreshEvents bool             // send the event exactly as given
}

// SampleResult is what the invoke answered, the function's output and what Fresh changed.
type SampleResult struct {
	Fixture  *Fixture // the invoke's tables, queues and state machine, for a test to look into
	Response []byte
	Output   string
	Fresh    []string
	Init     time.Duration // 0 when the emulator did not report it
}

// Run performs the invoke.
func (s Sample) Run(ctx context.Context) (SampleResult, error) {
	logw := s.Log
	if logw == nil {
		logw = os.Stderr
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	dir, err := os.MkdirTemp("", "twice-invoke-")
	if err != nil {
		return SampleResult{}, err
	}
	defer os.RemoveAll(dir)

	sim, err := stripesim.New(stripesim.Config{DataDir: dir, APIKeys: []string{InvokeSecrets.StripeAPIKey}})
	if err != nil {
		return SampleResult{}, err
	}
	defer sim.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return SampleResult{}, err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	prefix := "invoke-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	fx, err := NewFixture(ctx, s.Root, prefix, s.DynamoDB, s.Moto, "http://"+ln.Addr().String(), InvokeSecrets)
	if err != nil {
		return SampleResult{}, err
	}
	if err := SeedSamplePayment(ctx, fx); err != nil {
		return SampleResult{}, err
	}
	bin := s.Bootstrap
	if bin == "" {
		fmt.Fprintf(logw, "invoke: building functions/%s for linux/%s\n", s.Fn, runtime.GOARCH)
		if bin, err = Build(ctx, s.Root, "./functions/"+s.Fn, runtime.GOARCH, dir); err != nil {
			return SampleResult{}, err
		}
	}
	event, res := s.Event, SampleResult{Fixture: fx}
	if !s.DisableFreshEvents {
		if event, res.Fresh, err = Fresh(s.Event, now(), InvokeSecrets); err != nil {
			return SampleResult{}, err
		}
		for _, n := range res.Fresh {
			fmt.Fprintln(logw, "invoke: fresh:", n)
		}
	}
	em, err := Start(ctx, s.RIE, bin, fx.Env())
	if err != nil {
		return SampleResult{}, err
	}
	defer em.Close()
	res.Response, err = em.Invoke(ctx, event)
	res.Output = em.Output()
	if err != nil {
		return res, err
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if d, ok := em.WaitInitDuration(wait); ok {
		res.Init = d
	}
	res.Output = em.Output()
	return res, nil
}

// SamplePaymentID is the payment the samples name: get-payment reads it, the recovery steps
// plan and dead-letter its recovery, the outbox relay starts that recovery, the webhook
// worker applies its success.
const SamplePaymentID = "pay_sample"

// SeedSamplePayment writes SamplePaymentID into fx's payments table as payments-api leaves a
// soft decline (insufficient funds on a Visa card, 2026-11-29 07:59 UTC, a minute before the
// webhook sample's event), so each sample that names it meets it as in a deployment.
func SeedSamplePayment(ctx context.Context, fx *Fixture) error {
	at := time.Date(2026, 11, 29, 7, 59, 0, 0, time.UTC)
	p := payments.Payment{ID: SamplePaymentID, Scope: "jwt:client-acme", IdempotencyKey: "order-1001-attempt-1",
		Status: provider.StatusDeclined, Amount: 2000, Currency: "usd", Customer: "cus_acme",
		PaymentMethod: "pm_card_visa_chargeDeclinedInsufficientFunds", Invoice: "in_1001", Description: "Order 1001",
		Metadata: map[string]string{"order": "1001"}, ProviderPaymentID: "pi_3Sample",
		Decline:      &provider.Decline{Code: "insufficient_funds", ErrorCode: "card_declined", NetworkDeclineCode: "51", Network: "visa"},
		DeclineClass: string(declines.ClassLimit), Card: &payments.CardRef{Fingerprint: "fp_sample", Brand: "visa", Last4: "9995"},
		CreatedAt: at, UpdatedAt: at, Version: payments.VersionAt(at, provider.StatusDeclined)}
	w, err := p.Put()
	if err != nil {
		return err
	}
	return dynamo.New(dynamo.NewClient(fx.DynamoDB), fx.Tables).Transact(ctx, w)
}

// Answer sums up a function's response in the words of docs/invoke.md's table: an HTTP API
// answer's status (and problem type, redirect, payment status or record count); an SQS or
// stream batch's failed item ids; a reconciliation or backfill report's counts; a recovery
// plan's decision or a record's id; an error's type.
func Answer(resp []byte) string {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(resp, &v); err != nil {
		return "not JSON: " + string(resp)
	}
	if raw, ok := v["errorType"]; ok {
		var typ string
		_ = json.Unmarshal(raw, &typ)
		return "error " + typ
	}
	if _, ok := v["statusCode"]; ok {
		var r struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Body       string            `json:"body"`
		}
		_ = json.Unmarshal(resp, &r)
		out := strconv.Itoa(r.StatusCode)
		switch {
		case r.Headers["Content-Type"] == "application/problem+json":
			var p struct{ Type string }
			_ = json.Unmarshal([]byte(r.Body), &p)
			_, typ, _ := strings.Cut(p.Type, "#problem-")
			out += " problem+json " + typ
		case r.Headers["Location"] != "" && r.StatusCode/100 == 3:
			out += " to " + r.Headers["Location"]
		case strings.HasPrefix(r.Headers["Content-Type"], "application/json"):
			var b map[string]any
			if json.Unmarshal([]byte(r.Body), &b) == nil {
				if s, ok := b["status"].(string); ok {
					out += " status " + s
				}
				if rs, ok := b["records"].([]any); ok {
					out += fmt.Sprintf(" with %d records", len(rs))
				}
			}
		}
		return out
	}
	if raw, ok := v["batchItemFailures"]; ok {
		var f []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		}
		_ = json.Unmarshal(raw, &f)
		if len(f) == 0 {
			return "no batch item failures"
		}
		ids := make([]string, len(f))
		for i, x := range f {
			ids[i] = x.ItemIdentifier
		}
		sort.Strings(ids)
		return "batch item failures " + strings.Join(ids, ",")
	}
	if _, ok := v["run_id"]; ok {
		var r struct {
			Differences []json.RawMessage `json:"differences"`
		}
		_ = json.Unmarshal(resp, &r)
		return fmt.Sprintf("reconciliation report, %d differences", len(r.Differences))
	}
	if _, ok := v["checkpoint"]; ok {
		var r struct {
			Listed  int               `json:"listed"`
			Applied []json.RawMessage `json:"applied"`
		}
		_ = json.Unmarshal(resp, &r)
		return fmt.Sprintf("backfill report, %d listed, %d applied", r.Listed, len(r.Applied))
	}
	if raw, ok := v["plan"]; ok {
		var p struct {
			Retry  bool   `json:"retry"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(raw, &p)
		if p.Retry {
			return "plan: retry, " + p.Reason
		}
		return "plan: stop, " + p.Reason
	}
	if raw, ok := v["id"]; ok && len(v) == 1 {
		var id string
		_ = json.Unmarshal(raw, &id)
		return "id " + id
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "object with " + strings.Join(keys, ",")
}
