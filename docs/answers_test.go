package docs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/runtwice/twice/infra/inprocess"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// clockStart is the local stack's clock start, so that no answer depends on the day.
var clockStart = time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC)

// TestOpenAPIDescribesTheAnswers sends requests covering each documented status to the real
// handlers (the local stack, and a payments service over a scripted provider for the
// provider failures the simulator cannot be made to give on cue) and validates every request
// and answer against openapi.yaml: an undocumented status, header or body shape fails.
func TestOpenAPIDescribesTheAnswers(t *testing.T) {
	s := loadSpec(t)
	c := &client{t: t}
	localStack(t, c)
	scriptedPayments(t, c)
	covered := s.validate(t, c.seen)

	// What this test must keep exercising: each answer the issue asked for.
	want := []string{
		"POST /payments 201", "POST /payments 202", "POST /payments 402", "POST /payments 400",
		"POST /payments 409", "POST /payments 413", "POST /payments 422", "POST /payments 500",
		"POST /payments 502", "POST /payments 503", "POST /payments 401",
		"GET /payments/{id} 200", "GET /payments/{id} 404",
		"POST /payments/{id}/refunds 201", "POST /payments/{id}/refunds 400", "POST /payments/{id}/refunds 404",
		"POST /payments/{id}/refunds 409", "POST /payments/{id}/refunds 422",
		"POST /webhooks/{provider} 200", "POST /webhooks/{provider} 400", "POST /webhooks/{provider} 404",
		"POST /webhooks/{provider} 413", "POST /webhooks/{provider} 503",
		"GET /ops/deadletters 200", "GET /ops/deadletters 400", "GET /ops/deadletters 401",
		"GET /ops/deadletters/{id} 200", "GET /ops/deadletters/{id} 404", "GET /ops/deadletters/{id}/audit 200",
		"POST /ops/deadletters/{id}/retry 200", "POST /ops/deadletters/{id}/retry 409",
		"POST /ops/deadletters/{id}/override 200", "POST /ops/deadletters/{id}/override 400",
		"POST /ops/deadletters/{id}/resolve 200", "POST /ops/deadletters/{id}/ignore 200",
		"POST /ops/deadletters/{id}/resolve 409", "POST /ops/deadletters/retry 200",
		"GET /ops/attempts 200", "GET /ops/attempts 400", "GET /ops/refused 200", "GET /ops/refused 400",
		"GET /ops/payments/{id}/timeline 200", "GET /ops/payments/{id}/timeline 404",
		"GET /ops/recoveries 200", "GET /ops/recoveries 400",
		"POST /ops/recoveries/{id}/{action} 202", "POST /ops/recoveries/{id}/{action} 409",
		"POST /ops/recoveries/{id}/{action} 400",
		"POST /ops/reconcile 200", "POST /ops/reconcile 400",
	}
	for _, w := range want {
		if !covered[w] {
			t.Errorf("no exchange answered %s", w)
		}
	}
	// Documented answers nothing here produces (API Gateway's own, and failures of the store)
	// are listed for the reader of -v output.
	var missing []string
	for _, op := range documentedAnswers(s) {
		if !covered[op] {
			missing = append(missing, op)
		}
	}
	t.Logf("%d answers exercised; documented but not exercised: %s", len(covered), strings.Join(missing, ", "))
}

func documentedAnswers(s *spec) []string {
	var out []string
	for path, item := range s.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for code := range op.Responses.Codes.KeysFromOldest() {
				out = append(out, strings.ToUpper(method)+" "+path+" "+code)
			}
		}
	}
	slices.Sort(out)
	return out
}

// localStack exercises the local stack: the same handlers, adapters and routes as template.yaml.
func localStack(t *testing.T, c *client) {
	st, err := inprocess.New(inprocess.Config{Addr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", DataDir: t.TempDir(),
		ClockStart: clockStart, ProviderTimeout: 300 * time.Millisecond, ResolveDelay: 50 * time.Millisecond,
		ReconcileEvery: -1, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st.Start()
	t.Cleanup(func() { st.Close() })
	started := time.Now()
	api, sim := st.APIURL(), st.SimURL()
	ops := map[string]string{"Authorization": "Bearer " + st.Config().OperatorToken}
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	pay := func(pm, invoice string) string {
		b := fmt.Sprintf(`{"amount":2500,"currency":"usd","customer":"cus_doc","payment_method":%q`, pm)
		if invoice != "" {
			b += fmt.Sprintf(`,"invoice":%q`, invoice)
		}
		return b + `,"metadata":{"order":"1"}}`
	}
	// simulate drives the provider simulator (its control API is not documented here).
	simulate := func(path, body string) {
		if ex := c.send(path, req{base: sim, method: "POST", path: path, body: body}); ex.status/100 != 2 {
			t.Fatalf("%s: %d %s", path, ex.status, ex.respBody)
		}
	}
	idOf := func(ex exchange) string {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(ex.respBody, &v); err != nil || v.ID == "" {
			t.Fatalf("%s: no id in %s", ex.name, ex.respBody)
		}
		return v.ID
	}

	// The payments API.
	ok := must(t, c.do("create", req{base: api, method: "POST", path: "/payments", header: key("doc-ok"), body: pay("pm_card_visa", "")}), 201)
	okID := idOf(ok)
	must(t, c.do("replay", req{base: api, method: "POST", path: "/payments", header: key("doc-ok"), body: pay("pm_card_visa", "")}), 201)
	if ok := c.seen[len(c.seen)-1]; ok.respHeader.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: Idempotent-Replayed %q", ok.respHeader.Get("Idempotent-Replayed"))
	}
	must(t, c.do("key reused with another body", req{base: api, method: "POST", path: "/payments", header: key("doc-ok"),
		body: strings.Replace(pay("pm_card_visa", ""), "2500", "2600", 1)}), 422)
	soft := must(t, c.do("soft decline", req{base: api, method: "POST", path: "/payments", header: key("doc-soft"),
		body: pay("pm_card_visa_chargeDeclinedInsufficientFunds", "inv_doc_soft")}), 402)
	softID := idOf(soft)
	hard := must(t, c.do("hard decline", req{base: api, method: "POST", path: "/payments", header: key("doc-hard"),
		body: pay("pm_card_visa_chargeDeclinedLostCard", "inv_doc_hard")}), 402)
	hardID := idOf(hard)
	simulate("/_sim/faults", `{"path_prefix":"/v1/payment_intents","fault":"timeout_after_effect","count":1}`)
	must(t, c.do("unknown outcome", req{base: api, method: "POST", path: "/payments", header: key("doc-pending"), body: pay("pm_card_visa", "")}), 202)
	must(t, c.do("no key", req{base: api, method: "POST", path: "/payments", body: pay("pm_card_visa", ""), breaks: true}), 400)
	must(t, c.do("key with a space", req{base: api, method: "POST", path: "/payments", header: key("doc key"), body: pay("pm_card_visa", ""), breaks: true}), 400)
	must(t, c.do("unknown field", req{base: api, method: "POST", path: "/payments", header: key("doc-bad-1"),
		body: `{"amount":2500,"currency":"usd","customer":"cus_doc","payment_method":"pm_card_visa","color":"red"}`, breaks: true}), 400)
	must(t, c.do("fields out of range", req{base: api, method: "POST", path: "/payments", header: key("doc-bad-2"),
		body: `{"amount":0,"currency":"USD","customer":"","payment_method":"pm_card_visa"}`, breaks: true}), 400)
	must(t, c.do("body too large", req{base: api, method: "POST", path: "/payments", header: key("doc-big"),
		body: `{"description":"` + strings.Repeat("x", payments.MaxBody) + `"}`, breaks: true}), 413)
	must(t, c.do("read", req{base: api, method: "GET", path: "/payments/" + okID}), 200)
	must(t, c.do("read unknown", req{base: api, method: "GET", path: "/payments/pay_nope"}), 404)

	// Refunds.
	refunds := "/payments/" + okID + "/refunds"
	must(t, c.do("refund part", req{base: api, method: "POST", path: refunds, header: key("doc-refund-1"), body: `{"amount":1000,"reason":"requested_by_customer"}`}), 201)
	must(t, c.do("refund replayed", req{base: api, method: "POST", path: refunds, header: key("doc-refund-1"), body: `{"amount":1000,"reason":"requested_by_customer"}`}), 201)
	must(t, c.do("refund key reused", req{base: api, method: "POST", path: refunds, header: key("doc-refund-1"), body: `{"amount":900}`}), 422)
	must(t, c.do("refund too large", req{base: api, method: "POST", path: refunds, header: key("doc-refund-2"), body: `{"amount":2000}`}), 422)
	must(t, c.do("refund bad amount", req{base: api, method: "POST", path: refunds, header: key("doc-refund-3"), body: `{"amount":0}`, breaks: true}), 400)
	must(t, c.do("refund of a decline", req{base: api, method: "POST", path: "/payments/" + softID + "/refunds", header: key("doc-refund-4")}), 409)
	must(t, c.do("refund of no payment", req{base: api, method: "POST", path: "/payments/pay_nope/refunds", header: key("doc-refund-5")}), 404)
	must(t, c.do("read refunded", req{base: api, method: "GET", path: "/payments/" + okID}), 200)

	// Webhooks.
	event := fmt.Sprintf(`{"id":"evt_doc_1","object":"event","type":"payment_intent.succeeded","created":%d,"data":{"object":{"id":"pi_doc_unknown","object":"payment_intent","status":"succeeded","amount":100,"currency":"usd"}}}`, clockStart.Unix())
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(event),
		Secret: st.Config().StripeWebhookSecret, Timestamp: clockStart.Add(time.Since(started))})
	must(t, c.do("signed webhook", req{base: api, method: "POST", path: "/webhooks/stripe",
		header: map[string]string{"Stripe-Signature": signed.Header}, body: event}), 200)
	must(t, c.do("unsigned webhook", req{base: api, method: "POST", path: "/webhooks/stripe", body: event}), 400)
	must(t, c.do("unknown provider", req{base: api, method: "POST", path: "/webhooks/acme", body: event, breaks: true}), 404)
	must(t, c.do("webhook too large", req{base: api, method: "POST", path: "/webhooks/stripe",
		header: map[string]string{"Stripe-Signature": signed.Header}, body: `{"x":"` + strings.Repeat("x", 200<<10) + `"}`}), 413)

	// The operator API. A reconciliation finds a payment the provider has and we do not: a
	// record with nothing to retry.
	simulate("/_sim/payment_intents", fmt.Sprintf(`{"amount":700,"currency":"usd","customer":"cus_doc","created":%d}`, clockStart.Add(-time.Hour).Unix()))
	must(t, c.do("reconcile", req{base: api, method: "POST", path: "/ops/reconcile", header: ops, body: `{}`}), 200)
	must(t, c.do("reconcile a bad window", req{base: api, method: "POST", path: "/ops/reconcile", header: ops,
		body: `{"from":"2027-06-09T00:00:00Z"}`, breaks: true}), 400)
	list := must(t, c.do("list", req{base: api, method: "GET", path: "/ops/deadletters?source=reconciliation&limit=10", header: ops}), 200)
	recon := firstRecord(t, list)
	must(t, c.do("list without a token", req{base: api, method: "GET", path: "/ops/deadletters", breaks: true}), 401)
	must(t, c.do("list by an unknown status", req{base: api, method: "GET", path: "/ops/deadletters?status=lost", header: ops, breaks: true}), 400)
	must(t, c.do("detail", req{base: api, method: "GET", path: "/ops/deadletters/" + recon, header: ops}), 200)
	must(t, c.do("detail unknown", req{base: api, method: "GET", path: "/ops/deadletters/dl_nope", header: ops}), 404)
	must(t, c.do("audit", req{base: api, method: "GET", path: "/ops/deadletters/" + recon + "/audit", header: ops}), 200)
	must(t, c.do("retry what has no retry", req{base: api, method: "POST", path: "/ops/deadletters/" + recon + "/retry", header: ops, body: `{}`}), 409)
	must(t, c.do("override without a note", req{base: api, method: "POST", path: "/ops/deadletters/" + recon + "/override", header: ops,
		body: `{"outcome":"refunded at the provider"}`}), 400)
	must(t, c.do("override", req{base: api, method: "POST", path: "/ops/deadletters/" + recon + "/override", header: ops,
		body: `{"outcome":"refunded at the provider","note":"customer asked"}`}), 200)
	must(t, c.do("resolve a closed record", req{base: api, method: "POST", path: "/ops/deadletters/" + recon + "/resolve", header: ops, body: `{"note":"done"}`}), 409)
	must(t, c.do("bulk retry", req{base: api, method: "POST", path: "/ops/deadletters/retry?source=reconciliation", header: ops, body: `{"note":"bulk"}`}), 200)

	// The hard decline's recovery stops at once and opens a record a retry can restart.
	var hardRec string
	waitFor(t, "the hard decline's dead-letter record", func() bool {
		ex := c.send("poll", req{base: api, method: "GET", path: "/ops/deadletters?source=recovery", header: ops})
		hardRec = recordOf(ex, hardID)
		return hardRec != ""
	})
	must(t, c.do("list recovery records", req{base: api, method: "GET", path: "/ops/deadletters?source=recovery", header: ops}), 200)
	must(t, c.do("retry", req{base: api, method: "POST", path: "/ops/deadletters/" + hardRec + "/retry", header: ops, body: `{"note":"card updated","retries":0}`}), 200)
	must(t, c.do("ignore", req{base: api, method: "POST", path: "/ops/deadletters/" + hardRec + "/ignore", header: ops, body: `{"note":"known"}`}), 200)
	must(t, c.do("resolve", req{base: api, method: "POST", path: "/ops/deadletters/" + hardRec + "/resolve", header: ops}), 200)

	// Attempts.
	must(t, c.do("attempts by key", req{base: api, method: "GET", path: "/ops/attempts?idempotency_key=doc-ok", header: ops}), 200)
	must(t, c.do("attempts by payment", req{base: api, method: "GET", path: "/ops/attempts?payment_id=" + softID, header: ops}), 200)
	must(t, c.do("attempts by nothing", req{base: api, method: "GET", path: "/ops/attempts", header: ops}), 400)
	must(t, c.do("refused", req{base: api, method: "GET", path: "/ops/refused?day=" + clockStart.Format("2006-01-02"), header: ops}), 200)
	must(t, c.do("refused on a bad day", req{base: api, method: "GET", path: "/ops/refused?day=June", header: ops, breaks: true}), 400)

	// The soft decline's recovery waits for its next attempt.
	waitFor(t, "the soft decline's recovery is running", func() bool {
		ex := c.send("poll", req{base: api, method: "GET", path: "/ops/recoveries", header: ops})
		return strings.Contains(string(ex.respBody), softID)
	})
	must(t, c.do("recoveries", req{base: api, method: "GET", path: "/ops/recoveries?limit=10", header: ops}), 200)
	must(t, c.do("recoveries, too many", req{base: api, method: "GET", path: "/ops/recoveries?limit=1000", header: ops, breaks: true}), 400)
	must(t, c.do("read with a recovery", req{base: api, method: "GET", path: "/payments/" + softID}), 200)
	must(t, c.do("timeline", req{base: api, method: "GET", path: "/ops/payments/" + softID + "/timeline", header: ops}), 200)
	must(t, c.do("timeline of a hard decline", req{base: api, method: "GET", path: "/ops/payments/" + hardID + "/timeline", header: ops}), 200)
	must(t, c.do("timeline unknown", req{base: api, method: "GET", path: "/ops/payments/pay_nope/timeline", header: ops}), 404)
	must(t, c.do("steer with an unknown action", req{base: api, method: "POST", path: "/ops/recoveries/" + softID + "/pause", header: ops, breaks: true}), 400)
	must(t, c.do("steer what has no recovery", req{base: api, method: "POST", path: "/ops/recoveries/" + okID + "/stop", header: ops}), 409)
	must(t, c.do("stop", req{base: api, method: "POST", path: "/ops/recoveries/" + softID + "/stop", header: ops, body: `{"note":"customer asked"}`}), 202)
}

func firstRecord(t *testing.T, ex exchange) string {
	t.Helper()
	var p struct {
		Records []struct {
			ID string `json:"id"`
		} `json:"records"`
	}
	if err := json.Unmarshal(ex.respBody, &p); err != nil || len(p.Records) == 0 {
		t.Fatalf("%s: no record in %s", ex.name, ex.respBody)
	}
	return p.Records[0].ID
}

// recordOf is the id of the listed record of the payment.
func recordOf(ex exchange, paymentID string) string {
	var p struct {
		Records []struct {
			ID        string `json:"id"`
			PaymentID string `json:"payment_id"`
		} `json:"records"`
	}
	_ = json.Unmarshal(ex.respBody, &p)
	for _, r := range p.Records {
		if r.PaymentID == paymentID {
			return r.ID
		}
	}
	return ""
}

// waitFor polls check until it holds, for work the stack finishes in the background; it is
// bounded so a bug fails instead of hanging.
func waitFor(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		select {
		case <-deadline:
			t.Fatalf("not within 30 s: %s", what)
		case <-tick.C:
		}
	}
}

// scriptedProvider answers by payment method: the provider failures, and a create that waits
// until released, so that a second request with its key finds it in flight.
type scriptedProvider struct {
	provider.Provider // nil: only Create is called
	entered, release  chan struct{}
}

func (p *scriptedProvider) Create(ctx context.Context, r provider.CreateRequest) (provider.Payment, error) {
	switch r.PaymentMethod {
	case "pm_wait":
		close(p.entered)
		<-p.release
	case "pm_throttled":
		return provider.Payment{}, &provider.ThrottledError{Op: "create", RetryAfter: 3 * time.Second, Err: errors.New("429")}
	case "pm_unreachable":
		return provider.Payment{}, errors.New("connection refused")
	case "pm_rejected":
		return provider.Payment{}, &provider.PermanentError{Op: "create", StatusCode: 400, Code: "parameter_invalid_integer", Err: errors.New("400")}
	case "pm_mismatch":
		return provider.Payment{}, fmt.Errorf("create: %w", provider.ErrIdempotencyMismatch)
	}
	return provider.Payment{ID: "pi_scripted_" + r.PaymentMethod, Status: provider.StatusSucceeded, Amount: r.Amount,
		Currency: r.Currency, Customer: r.Customer, PaymentMethod: r.PaymentMethod, Created: clockStart, Metadata: r.Metadata}, nil
}

// scriptedPayments exercises POST /payments over a scripted provider: 409 in flight, 503, 502,
// 422 provider-rejected (and its replay) and 500; then 401 as payments-api answers a request
// with no caller, and the webhook ingest's 503.
func scriptedPayments(t *testing.T, c *client) {
	db, err := boltstore.Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := func() time.Time { return clockStart }
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: db, Now: now, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	prov := &scriptedProvider{entered: make(chan struct{}), release: make(chan struct{})}
	svc := &payments.Service{Store: db, Keeper: k, Provider: prov, Now: now, Log: quiet(),
		Classify: func(d provider.Decline) string { return "generic" }}
	srv := httptest.NewServer(svc.Handler(func(*http.Request) string { return "local" }))
	t.Cleanup(srv.Close)
	post := func(name, key, pm string) exchange {
		return c.do(name, req{base: srv.URL, method: "POST", path: "/payments", header: map[string]string{"Idempotency-Key": key},
			body: fmt.Sprintf(`{"amount":1000,"currency":"eur","customer":"cus_doc","payment_method":%q}`, pm)})
	}

	type sent struct {
		ex  exchange
		err error
	}
	first := make(chan sent, 1)
	go func() {
		ex, err := sendRequest("first of two", req{base: srv.URL, method: "POST", path: "/payments",
			header: map[string]string{"Idempotency-Key": "doc-wait"},
			body:   `{"amount":1000,"currency":"eur","customer":"cus_doc","payment_method":"pm_wait"}`})
		first <- sent{ex, err}
	}()
	<-prov.entered
	ex := must(t, post("in flight", "doc-wait", "pm_wait"), 409)
	if ex.respHeader.Get("Retry-After") == "" {
		t.Errorf("409 without Retry-After")
	}
	close(prov.release)
	f := <-first
	if f.err != nil {
		t.Fatal(f.err)
	}
	ex = f.ex
	c.keep(ex)
	must(t, ex, 201)

	must(t, post("provider busy", "doc-busy", "pm_throttled"), 503)
	must(t, post("provider unreachable", "doc-down", "pm_unreachable"), 502)
	must(t, post("provider rejected", "doc-rejected", "pm_rejected"), 422)
	must(t, post("provider rejected, replayed", "doc-rejected", "pm_rejected"), 422)
	must(t, post("provider saw our key with another body", "doc-mismatch", "pm_mismatch"), 500)

	// payments-api as AWS wires it, reached without an authenticated caller.
	aws := httptest.NewServer(apigw.RequireScope(svc.Handler(apigw.Scope)))
	t.Cleanup(aws.Close)
	must(t, c.do("no caller", req{base: aws.URL, method: "POST", path: "/payments", header: map[string]string{"Idempotency-Key": "doc-anon"},
		body: `{"amount":1000,"currency":"eur","customer":"cus_doc","payment_method":"pm_card_visa"}`}), 401)

	// The webhook ingest while its secrets cannot be read.
	mux := http.NewServeMux()
	mux.Handle(ingest.Pattern, &ingest.Handler{Verifiers: unreadableSecrets{}, Log: quiet()})
	in := httptest.NewServer(mux)
	t.Cleanup(in.Close)
	ex = must(t, c.do("secrets unreadable", req{base: in.URL, method: "POST", path: "/webhooks/stripe",
		header: map[string]string{"Stripe-Signature": "t=1,v1=00"}, body: `{"id":"evt_doc_2"}`}), 503)
	if ex.respHeader.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
}

// unreadableSecrets is a secret store that cannot be read.
type unreadableSecrets struct{}

func (unreadableSecrets) Verifier(context.Context, string) (webhooks.Verifier, error) {
	return nil, errors.New("the parameter store is unreachable")
}
