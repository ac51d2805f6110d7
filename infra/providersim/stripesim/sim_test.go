package stripesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/provider"
)

const testSecret = "whsec_test_secret"

// newClock starts at the wall time: stripe-go's webhook.ConstructEvent, which these tests use
// to verify the simulator's signatures, checks the timestamp against the wall clock.
func newClock() *clock.Fake { return clock.NewFake(time.Now().Truncate(time.Second)) }

// receiver is a webhook endpoint that verifies every delivery with stripe-go.
type receiver struct {
	mu       sync.Mutex
	events   []stripe.Event
	failNext int // answer 500 to this many deliveries
	status   []int
	srv      *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), testSecret)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			t.Errorf("webhook does not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if rc.failNext > 0 {
			rc.failNext--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		rc.events = append(rc.events, ev)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// got returns the events received, in arrival order.
func (rc *receiver) got() []stripe.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripe.Event(nil), rc.events...)
}

// byID sorts events in creation order: ids are fixed-width sequence numbers. Separate
// outbox entries are sent in parallel, so arrival order is not creation order.
func byID(evs []stripe.Event) []stripe.Event {
	slices.SortFunc(evs, func(a, b stripe.Event) int { return strings.Compare(a.ID, b.ID) })
	return evs
}

type harness struct {
	sim    *Simulator
	srv    *httptest.Server
	clock  *clock.Fake
	client *stripe.Client
	hooks  *receiver
	dir    string
}

func newHarness(t *testing.T, mod ...func(*Config)) *harness {
	t.Helper()
	h := &harness{clock: newClock(), hooks: newReceiver(t), dir: t.TempDir()}
	h.open(t, mod...)
	return h
}

func (h *harness) config(mod ...func(*Config)) Config {
	cfg := Config{DataDir: h.dir, WebhookURL: h.hooks.srv.URL, WebhookSecret: testSecret, Now: h.clock.Now,
		Rand: rand.New(rand.NewPCG(1, 2)), HoldTimeout: 5 * time.Second, NoSync: true}
	for _, m := range mod {
		m(&cfg)
	}
	return cfg
}

func (h *harness) open(t *testing.T, mod ...func(*Config)) {
	t.Helper()
	sim, err := New(h.config(mod...))
	if err != nil {
		t.Fatal(err)
	}
	h.sim = sim
	h.srv = httptest.NewServer(sim)
	h.client = newStripeClient(h.srv.URL, DefaultAPIKey, 0)
	t.Cleanup(func() { h.close() })
}

func (h *harness) close() {
	h.srv.Close()
	_ = h.sim.Close()
}

func newStripeClient(url, key string, retries int64) *stripe.Client {
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(url), MaxNetworkRetries: stripe.Int64(retries),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:    &http.Client{Timeout: 2 * time.Second},
	})
	return stripe.NewClient(key, stripe.WithBackends(&stripe.Backends{API: b, Connect: b, Uploads: b, MeterEvents: b}))
}

func stripeCreate(pm, key string) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(2000), Currency: stripe.String("usd"), Customer: stripe.String("cus_A"),
		PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
		Description: stripe.String("invoice 7"),
	}
	p.AddMetadata("invoice", "inv_7")
	p.AddExpand("latest_charge")
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// post sends a raw form request and returns status, headers and body.
func (h *harness) post(t *testing.T, path, key string, form url.Values) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(DefaultAPIKey, "")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (h *harness) control(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, rd)
	st, _, b := do(t, req)
	return st, b
}

func TestTestCardsThroughStripeGo(t *testing.T) {
	cases := map[string]struct {
		pm          string
		wantCode    string
		wantDecline string
		wantMessage string
	}{
		"visa succeeds":       {pm: "pm_card_visa"},
		"mastercard succeeds": {pm: "pm_card_mastercard"},
		"generic decline":     {pm: "pm_card_visa_chargeDeclined", wantCode: "card_declined", wantDecline: "generic_decline", wantMessage: msgDeclined},
		"insufficient funds":  {pm: "pm_card_visa_chargeDeclinedInsufficientFunds", wantCode: "card_declined", wantDecline: "insufficient_funds", wantMessage: msgFunds},
		"lost card":           {pm: "pm_card_visa_chargeDeclinedLostCard", wantCode: "card_declined", wantDecline: "lost_card", wantMessage: msgDeclined},
		"stolen card":         {pm: "pm_card_visa_chargeDeclinedStolenCard", wantCode: "card_declined", wantDecline: "stolen_card", wantMessage: msgDeclined},
		"velocity":            {pm: "pm_card_visa_chargeDeclinedVelocityLimitExceeded", wantCode: "card_declined", wantDecline: "card_velocity_exceeded", wantMessage: msgVelocity},
		"expired":             {pm: "pm_card_chargeDeclinedExpiredCard", wantCode: "expired_card", wantDecline: "expired_card", wantMessage: msgExpired},
		"incorrect cvc":       {pm: "pm_card_chargeDeclinedIncorrectCvc", wantCode: "incorrect_cvc", wantDecline: "incorrect_cvc", wantMessage: msgCVC},
		"processing error":    {pm: "pm_card_chargeDeclinedProcessingError", wantCode: "processing_error", wantDecline: "processing_error", wantMessage: msgProcess},
	}
	h := newHarness(t)
	ctx := context.Background()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate(tc.pm, "key-"+name))
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 2000 || pi.LatestCharge == nil ||
					!strings.HasPrefix(pi.ID, "pi_") || pi.Metadata["invoice"] != "inv_7" || pi.Customer.ID != "cus_A" ||
					pi.PaymentMethod.ID != tc.pm || pi.Livemode || pi.ClientSecret == "" {
					t.Fatalf("unexpected intent %+v", pi)
				}
				if pi.LatestCharge.Outcome == nil || pi.LatestCharge.Outcome.Type != "authorized" || pi.LatestCharge.PaymentMethodDetails.Card.Brand == "" {
					t.Fatalf("expanded charge: %+v", pi.LatestCharge)
				}
				return
			}
			var se *stripe.Error
			if !errors.As(err, &se) {
				t.Fatalf("want *stripe.Error, got %v", err)
			}
			if se.HTTPStatusCode != http.StatusPaymentRequired || se.Type != stripe.ErrorTypeCard ||
				string(se.Code) != tc.wantCode || string(se.DeclineCode) != tc.wantDecline || se.Msg != tc.wantMessage {
				t.Fatalf("error = %d %s %s %s %q", se.HTTPStatusCode, se.Type, se.Code, se.DeclineCode, se.Msg)
			}
			if se.PaymentIntent == nil || se.PaymentIntent.Status != stripe.PaymentIntentStatusRequiresPaymentMethod ||
				se.PaymentIntent.LastPaymentError == nil || string(se.PaymentIntent.LastPaymentError.DeclineCode) != tc.wantDecline ||
				se.PaymentMethod == nil || se.PaymentMethod.ID != tc.pm || se.ChargeID == "" {
				t.Fatalf("decline lacks its intent or payment method: %+v", se)
			}
			if ch := se.PaymentIntent.LatestCharge; ch == nil || ch.Outcome == nil || ch.Outcome.Reason != tc.wantDecline ||
				ch.Outcome.Type != "issuer_declined" || ch.Status != stripe.ChargeStatusFailed {
				t.Fatalf("expanded failed charge: %+v", ch)
			}
			got, err := h.client.V1PaymentIntents.Retrieve(ctx, se.PaymentIntent.ID, nil)
			if err != nil || got.Status != stripe.PaymentIntentStatusRequiresPaymentMethod || got.PaymentMethod != nil {
				t.Fatalf("retrieve after decline: %+v %v", got, err)
			}
		})
	}
}

func TestConfirmAfterCreate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pi, err := h.client.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(500), Currency: stripe.String("eur")})
	if err != nil || pi.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("create: %+v %v", pi, err)
	}
	_, err = h.client.V1PaymentIntents.Confirm(ctx, pi.ID, &stripe.PaymentIntentConfirmParams{
		PaymentMethod: stripe.String("pm_card_visa_chargeDeclinedInsufficientFunds")})
	var se *stripe.Error
	if !errors.As(err, &se) || se.DeclineCode != stripe.DeclineCodeInsufficientFunds {
		t.Fatalf("first confirm: %v", err)
	}
	ok, err := h.client.V1PaymentIntents.Confirm(ctx, pi.ID, &stripe.PaymentIntentConfirmParams{
		PaymentMethod: stripe.String("pm_card_mastercard")})
	if err != nil || ok.Status != stripe.PaymentIntentStatusSucceeded || ok.LastPaymentError != nil {
		t.Fatalf("second confirm: %+v %v", ok, err)
	}
	_, err = h.client.V1PaymentIntents.Confirm(ctx, pi.ID, nil)
	if !errors.As(err, &se) || se.HTTPStatusCode != 400 || se.Code != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("confirm of a succeeded intent: %v", err)
	}
	_, err = h.client.V1PaymentIntents.Retrieve(ctx, "pi_missing", nil)
	if !errors.As(err, &se) || se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("retrieve missing: %v", err)
	}
}

func TestProgrammedCardDeclinesThenSucceeds(t *testing.T) {
	h := newHarness(t)
	st, body := h.control(t, "POST", "/_sim/cards", map[string]any{"payment_method": "pm_recovery_1", "brand": "mastercard",
		"decline_code": "insufficient_funds", "times": 2, "network_advice_code": "24", "advice_code": "try_again_later"})
	if st != 200 {
		t.Fatalf("arm card: %d %s", st, body)
	}
	ctx := context.Background()
	for i := range 3 {
		pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_recovery_1", fmt.Sprint("attempt-", i)))
		if i < 2 {
			var se *stripe.Error
			if !errors.As(err, &se) || se.DeclineCode != stripe.DeclineCodeInsufficientFunds {
				t.Fatalf("attempt %d: %v", i, err)
			}
			if o := se.PaymentIntent.LatestCharge.Outcome; o.NetworkAdviceCode != "24" || o.AdviceCode != "try_again_later" {
				t.Fatalf("charge outcome: %+v", o)
			}
			raw := string(se.LastResponse.RawJSON)
			if !strings.Contains(raw, `"network_advice_code":"24"`) || !strings.Contains(raw, `"advice_code":"try_again_later"`) ||
				!strings.Contains(raw, `"brand":"mastercard"`) {
				t.Fatalf("advice codes missing: %s", raw)
			}
			continue
		}
		if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded {
			t.Fatalf("attempt %d: %+v %v", i, pi, err)
		}
	}
}

func TestIdempotency(t *testing.T) {
	h := newHarness(t)
	form := url.Values{"amount": {"1000"}, "currency": {"usd"}, "payment_method": {"pm_card_visa_chargeDeclined"}, "confirm": {"true"}}
	st1, hd1, b1 := h.post(t, "/v1/payment_intents", "k1", form)
	st2, hd2, b2 := h.post(t, "/v1/payment_intents", "k1", form)
	if st1 != 402 || st2 != 402 || !bytes.Equal(b1, b2) {
		t.Fatalf("replay differs: %d %d\n%s\n%s", st1, st2, b1, b2)
	}
	if hd1.Get("Idempotent-Replayed") != "" || hd2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("Idempotent-Replayed = %q, %q", hd1.Get("Idempotent-Replayed"), hd2.Get("Idempotent-Replayed"))
	}
	form.Set("amount", "1001")
	st3, _, b3 := h.post(t, "/v1/payment_intents", "k1", form)
	if st3 != 400 || !strings.Contains(string(b3), `"type":"idempotency_error"`) {
		t.Fatalf("mismatch: %d %s", st3, b3)
	}

	// Keys are scoped per API key.
	other := "sk_test_other"
	sim2 := newHarness(t, func(c *Config) { c.APIKeys = []string{DefaultAPIKey, other} })
	c1, c2 := sim2.client, newStripeClient(sim2.srv.URL, other, 0)
	a, err1 := c1.V1PaymentIntents.Create(context.Background(), stripeCreate("pm_card_visa", "shared"))
	b, err2 := c2.V1PaymentIntents.Create(context.Background(), stripeCreate("pm_card_visa", "shared"))
	if err1 != nil || err2 != nil || a.ID == b.ID {
		t.Fatalf("keys not scoped per API key: %v %v %s %s", err1, err2, a.ID, b.ID)
	}

	// Keys expire after 24 h of the simulated clock.
	st4, _, b4 := sim2.post(t, "/v1/payment_intents", "exp", url.Values{"amount": {"5"}, "currency": {"usd"}})
	sim2.clock.Advance(IdempotencyKeyTTL + time.Second)
	st5, hd5, b5 := sim2.post(t, "/v1/payment_intents", "exp", url.Values{"amount": {"5"}, "currency": {"usd"}})
	if st4 != 200 || st5 != 200 || hd5.Get("Idempotent-Replayed") != "" || bytes.Equal(b4, b5) {
		t.Fatalf("expired key replayed: %s / %s", b4, b5)
	}
}

func TestConcurrentCreatesOneKey(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	ids := make([]string, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pi, err := h.client.V1PaymentIntents.Create(context.Background(), stripeCreate("pm_card_visa", "same-key"))
			errs[i] = err
			if pi != nil {
				ids[i] = pi.ID
			}
		}()
	}
	wg.Wait()
	for i := range 50 {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("request %d: %s %v (first %s)", i, ids[i], errs[i], ids[0])
		}
	}
	st, _ := h.sim.Stats()
	if st.PaymentIntents != 1 || st.PaymentIntentsCreated != 1 || st.CreatesReplayed != 49 {
		t.Fatalf("stats %+v", st)
	}
}

func TestListPaginationAndFilters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	start := h.clock.Now().Unix()
	for i := range 150 {
		cust := "cus_even"
		if i%2 == 1 {
			cust = "cus_odd"
		}
		p := stripeCreate("pm_card_visa", fmt.Sprint("list-", i))
		p.Customer = stripe.String(cust)
		if _, err := h.client.V1PaymentIntents.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
	}
	collect := func(p *stripe.PaymentIntentListParams) []*stripe.PaymentIntent {
		var out []*stripe.PaymentIntent
		for pi, err := range h.client.V1PaymentIntents.List(ctx, p) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, pi)
		}
		return out
	}
	cases := map[string]struct {
		params *stripe.PaymentIntentListParams
		want   int
	}{
		"all, auto-paginated over 100": {params: &stripe.PaymentIntentListParams{}, want: 150},
		"gte and lte":                  {params: &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: start + 10, LesserThanOrEqual: start + 129}}, want: 120},
		"gt and lt":                    {params: &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThan: start + 10, LesserThan: start + 129}}, want: 118},
		"customer":                     {params: &stripe.PaymentIntentListParams{Customer: stripe.String("cus_odd")}, want: 75},
		"customer and range":           {params: &stripe.PaymentIntentListParams{Customer: stripe.String("cus_even"), CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: start + 100}}, want: 25},
		"page of 100":                  {params: &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(100)}}, want: 150},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := collect(tc.params)
			if len(got) != tc.want {
				t.Fatalf("got %d, want %d", len(got), tc.want)
			}
			seen := map[string]bool{}
			for i, pi := range got {
				if seen[pi.ID] {
					t.Fatalf("duplicate %s", pi.ID)
				}
				seen[pi.ID] = true
				if i > 0 && pi.Created > got[i-1].Created {
					t.Fatalf("not newest first at %d", i)
				}
			}
		})
	}

	lp := &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(2)}}
	lp.AddExpand("data.latest_charge")
	for pi, err := range h.client.V1PaymentIntents.List(ctx, lp) {
		if err != nil || pi.LatestCharge == nil || pi.LatestCharge.Amount != 2000 {
			t.Fatalf("expanded list item: %+v %v", pi, err)
		}
		break
	}

	// One raw page: has_more, url, and ending_before back from the second page.
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/payment_intents?limit=3", nil)
	req.Header.Set("Authorization", "Bearer "+DefaultAPIKey)
	st, _, b := do(t, req)
	var page struct {
		Object  string          `json:"object"`
		URL     string          `json:"url"`
		HasMore bool            `json:"has_more"`
		Data    []PaymentIntent `json:"data"`
	}
	if err := json.Unmarshal(b, &page); err != nil || st != 200 || page.Object != "list" || page.URL != "/v1/payment_intents" || !page.HasMore || len(page.Data) != 3 {
		t.Fatalf("page: %d %s", st, b)
	}
	req, _ = http.NewRequest("GET", h.srv.URL+"/v1/payment_intents?limit=2&ending_before="+page.Data[2].ID, nil)
	req.Header.Set("Authorization", "Bearer "+DefaultAPIKey)
	_, _, b = do(t, req)
	var back struct{ Data []PaymentIntent }
	_ = json.Unmarshal(b, &back)
	if len(back.Data) != 2 || back.Data[0].ID != page.Data[0].ID || back.Data[1].ID != page.Data[1].ID {
		t.Fatalf("ending_before: %s", b)
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t)
	cases := map[string]struct {
		path, body, auth string
		status           int
		want             string
	}{
		"no api key":         {path: "/v1/payment_intents", body: "amount=1&currency=usd", auth: "-", status: 401, want: "Invalid API Key"},
		"wrong api key":      {path: "/v1/payment_intents", body: "amount=1&currency=usd", auth: "Bearer sk_test_nope", status: 401, want: "invalid_request_error"},
		"unknown param":      {path: "/v1/payment_intents", body: "amount=1&currency=usd&colour=red", status: 400, want: "Received unknown parameter: colour"},
		"missing amount":     {path: "/v1/payment_intents", body: "currency=usd", status: 400, want: "parameter_missing"},
		"amount too large":   {path: "/v1/payment_intents", body: "amount=100000000&currency=usd", status: 400, want: "amount_too_large"},
		"bad integer":        {path: "/v1/payment_intents", body: "amount=ten&currency=usd", status: 400, want: "Invalid integer: ten"},
		"bad escape":         {path: "/v1/payment_intents", body: "amount=%zz", status: 400, want: "invalid_request_error"},
		"bad boolean":        {path: "/v1/payment_intents", body: "amount=1&currency=usd&confirm=yes&payment_method=pm_card_visa", status: 400, want: "Invalid boolean"},
		"unknown pm":         {path: "/v1/payment_intents", body: "amount=1&currency=usd&confirm=true&payment_method=pm_nope", status: 400, want: "No such PaymentMethod"},
		"malformed key":      {path: "/v1/payment_intents", body: "amount=1&currency=usd&metadata[a=1", status: 400, want: "parameter_unknown"},
		"unknown route":      {path: "/v1/charges", body: "", status: 404, want: "Unrecognized request URL"},
		"confirm missing pi": {path: "/v1/payment_intents/pi_nope/confirm", body: "payment_method=pm_card_visa", status: 404, want: "resource_missing"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+tc.path, strings.NewReader(tc.body))
			switch tc.auth {
			case "":
				req.SetBasicAuth(DefaultAPIKey, "")
			case "-":
			default:
				req.Header.Set("Authorization", tc.auth)
			}
			st, _, b := do(t, req)
			var env struct {
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if st != tc.status || json.Unmarshal(b, &env) != nil || env.Error.Type == "" || !strings.Contains(string(b), tc.want) {
				t.Fatalf("got %d %s", st, b)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("http_500 performs no effect", func(t *testing.T) {
		h := newHarness(t)
		h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/payment_intents", Fault: FaultHTTP500, Count: 1})
		st, _, b := h.post(t, "/v1/payment_intents", "f500", url.Values{"amount": {"1"}, "currency": {"usd"}})
		if st != 500 || !strings.Contains(string(b), `"type":"api_error"`) {
			t.Fatalf("%d %s", st, b)
		}
		st, hd, _ := h.post(t, "/v1/payment_intents", "f500", url.Values{"amount": {"1"}, "currency": {"usd"}})
		if stats, _ := h.sim.Stats(); st != 200 || hd.Get("Idempotent-Replayed") != "" || stats.PaymentIntents != 1 {
			t.Fatalf("after 500: %d %+v", st, stats)
		}
	})
	t.Run("http_429 with Retry-After", func(t *testing.T) {
		h := newHarness(t)
		h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/", Fault: FaultHTTP429, Count: 2, RetryAfterS: 7})
		for i := range 3 {
			st, hd, b := h.post(t, "/v1/payment_intents", "", url.Values{"amount": {"1"}, "currency": {"usd"}})
			if i < 2 && (st != 429 || hd.Get("Retry-After") != "7" || !strings.Contains(string(b), `"code":"rate_limit"`)) {
				t.Fatalf("try %d: %d %v %s", i, st, hd, b)
			}
			if i == 2 && st != 200 {
				t.Fatalf("fault not used up: %d", st)
			}
		}
	})
	t.Run("latency", func(t *testing.T) {
		h := newHarness(t)
		h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/payment_intents", Fault: FaultLatency, Count: 1, LatencyMS: 50})
		begin := time.Now()
		st, _, _ := h.post(t, "/v1/payment_intents", "", url.Values{"amount": {"1"}, "currency": {"usd"}})
		if st != 200 || time.Since(begin) < 50*time.Millisecond {
			t.Fatalf("latency not applied: %d %v", st, time.Since(begin))
		}
	})
	t.Run("timeout_after_effect then replay", func(t *testing.T) {
		h := newHarness(t)
		st, _ := h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/payment_intents", Fault: FaultTimeoutAfterEffect, Count: 1})
		if st != 201 {
			t.Fatal(st)
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := h.client.V1PaymentIntents.Create(cctx, stripeCreate("pm_card_visa", "tae"))
		if err == nil {
			t.Fatal("want the request to time out")
		}
		pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "tae"))
		if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded || pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %+v %v", pi, err)
		}
		if stats, _ := h.sim.Stats(); stats.PaymentIntents != 1 {
			t.Fatalf("want one intent, have %d", stats.PaymentIntents)
		}
	})
	t.Run("stripe-go retry with a short client timeout", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.HoldTimeout = 3 * time.Second })
		h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/payment_intents", Fault: FaultTimeoutAfterEffect, Count: 1})
		b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{URL: stripe.String(h.srv.URL),
			MaxNetworkRetries: stripe.Int64(2), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
			HTTPClient: &http.Client{Timeout: 200 * time.Millisecond}})
		c := stripe.NewClient(DefaultAPIKey, stripe.WithBackends(&stripe.Backends{API: b, Connect: b, Uploads: b, MeterEvents: b}))
		pi, err := c.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "tae2"))
		if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded {
			t.Fatalf("stripe-go retry: %v", err)
		}
		if stats, _ := h.sim.Stats(); stats.PaymentIntents != 1 || stats.CreatesReplayed != 1 {
			t.Fatalf("stats %+v", stats)
		}
	})
	t.Run("clear", func(t *testing.T) {
		h := newHarness(t)
		h.control(t, "POST", "/_sim/faults", Fault{PathPrefix: "/v1/", Fault: FaultHTTP500, Count: 5})
		st, b := h.control(t, "DELETE", "/_sim/faults", nil)
		if st != 200 || !strings.Contains(string(b), `"cleared":1`) {
			t.Fatalf("%d %s", st, b)
		}
		if st, _, _ := h.post(t, "/v1/payment_intents", "", url.Values{"amount": {"1"}, "currency": {"usd"}}); st != 200 {
			t.Fatalf("fault survived clear: %d", st)
		}
	})
	t.Run("bad control bodies", func(t *testing.T) {
		h := newHarness(t)
		for _, body := range []string{`{"path_prefix":"/v1","fault":"boom"}`, `{"fault":"http_500"}`, `{"path_prefix":"/v1","fault":"latency"}`, `{"x":1}`, `[`} {
			req, _ := http.NewRequest("POST", h.srv.URL+"/_sim/faults", strings.NewReader(body))
			st, hd, _ := do(t, req)
			if st != 400 || hd.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s: %d", body, st)
			}
		}
	})
}

func TestWebhooks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "wh1"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa_chargeDeclined", "wh2"))
	n, err := h.sim.Deliver(ctx)
	if err != nil || n != 2 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	got := byID(h.hooks.got())
	types := map[stripe.EventType]bool{}
	for _, ev := range got {
		types[ev.Type] = true
		if ev.Request == nil || ev.Request.IdempotencyKey == "" || !strings.HasPrefix(ev.ID, "evt_") {
			t.Fatalf("event lacks request: %+v", ev)
		}
	}
	if !types["payment_intent.succeeded"] || !types["payment_intent.payment_failed"] {
		t.Fatalf("types %v", types)
	}
	var obj stripe.PaymentIntent
	if err := json.Unmarshal(got[0].Data.Raw, &obj); err != nil || obj.ID != pi.ID {
		t.Fatalf("data.object: %v %s", err, obj.ID)
	}

	// Failing endpoint: retried with backoff on the injected clock.
	h.hooks.mu.Lock()
	h.hooks.failNext = 1
	h.hooks.mu.Unlock()
	if _, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "wh3")); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.sim.Deliver(ctx); n != 0 {
		t.Fatalf("first attempt should fail, sent %d", n)
	}
	h.clock.Advance(2 * time.Second) // the ceiling of the first retry is RetryBase*2
	if n, _ := h.sim.Deliver(ctx); n != 1 {
		t.Fatalf("retry sent %d", n)
	}
	st, b := h.control(t, "GET", "/_sim/events?type=payment_intent.succeeded", nil)
	var evs struct{ Data []EventState }
	_ = json.Unmarshal(b, &evs)
	if st != 200 || len(evs.Data) != 2 || evs.Data[0].State != DeliveryDelivered || evs.Data[0].Attempts != 2 {
		t.Fatalf("events: %s", b)
	}

	// Replay: the same event three times.
	evID := got[0].ID
	st, b = h.control(t, "POST", "/_sim/webhooks/replay", ReplayRequest{EventID: evID, Times: 3})
	if st != 202 {
		t.Fatalf("replay %d %s", st, b)
	}
	before := len(h.hooks.got())
	if n, _ := h.sim.Deliver(ctx); n != 3 {
		t.Fatalf("replayed %d", n)
	}
	for _, ev := range h.hooks.got()[before:] {
		if ev.ID != evID {
			t.Fatalf("replayed %s, want %s", ev.ID, evID)
		}
	}
	if st, _ := h.control(t, "POST", "/_sim/webhooks/replay", ReplayRequest{EventID: "evt_nope"}); st != 404 {
		t.Fatalf("unknown event: %d", st)
	}

	// flush sends an entry that is waiting for its retry time, without the clock moving.
	h.hooks.mu.Lock()
	h.hooks.failNext = 1
	h.hooks.mu.Unlock()
	_, _ = h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "wh4"))
	if n, _ := h.sim.Deliver(ctx); n != 0 {
		t.Fatal("first attempt should fail")
	}
	if n, _ := h.sim.Deliver(ctx); n != 0 {
		t.Fatal("retried before its time")
	}
	if st, b := h.control(t, "POST", "/_sim/webhooks/flush", nil); st != 200 || !strings.Contains(string(b), `"sent":1`) {
		t.Fatalf("flush: %d %s", st, b)
	}
}

func TestReplayShuffleAndDelay(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// One intent with three events: processing, then settled through the control.
	h.control(t, "POST", "/_sim/cards", map[string]any{"payment_method": "pm_slow", "processing": true})
	pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_slow", "slow"))
	if err != nil || pi.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("processing: %+v %v", pi, err)
	}
	if st, b := h.control(t, "POST", "/_sim/payment_intents/"+pi.ID+"/settle", SettleRequest{Outcome: "succeeded"}); st != 200 {
		t.Fatalf("settle %d %s", st, b)
	}
	_, _ = h.sim.Deliver(ctx)
	base := byID(h.hooks.got())
	if len(base) != 2 || base[0].Type != "payment_intent.processing" || base[1].Type != "payment_intent.succeeded" {
		t.Fatalf("base events %v", base)
	}
	st, b := h.control(t, "POST", "/_sim/webhooks/replay", ReplayRequest{EventID: base[0].ID, Times: 5, Shuffle: true, DelayMS: 60000})
	var rep struct {
		EventIDs []string `json:"event_ids"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || st != 202 || len(rep.EventIDs) != 10 {
		t.Fatalf("shuffle: %d %s", st, b)
	}
	if n, _ := h.sim.Deliver(ctx); n != 0 {
		t.Fatal("sent before the delay")
	}
	h.clock.Advance(time.Minute)
	if n, _ := h.sim.Deliver(ctx); n != 10 {
		t.Fatalf("sent %d", n)
	}
	var order []string
	for _, ev := range h.hooks.got()[2:] {
		order = append(order, ev.ID)
	}
	if fmt.Sprint(order) != fmt.Sprint(rep.EventIDs) {
		t.Fatalf("sent in %v, announced %v", order, rep.EventIDs)
	}
	sorted := true
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			sorted = false
		}
	}
	if sorted {
		t.Fatal("shuffle kept creation order") // seeded source: deterministic
	}
	_, b = h.control(t, "POST", "/_sim/webhooks/replay", ReplayRequest{EventID: base[0].ID, Reverse: true})
	if err := json.Unmarshal(b, &rep); err != nil || fmt.Sprint(rep.EventIDs) != fmt.Sprint([]string{base[1].ID, base[0].ID}) {
		t.Fatalf("reverse: %s", b)
	}
}

func TestDivergenceControls(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// A dropped webhook.
	h.control(t, "POST", "/_sim/webhooks/drop", map[string]int{"count": 1})
	dropped, _ := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "drop"))
	// A PaymentIntent with no webhook at all, backdated.
	st, b := h.control(t, "POST", "/_sim/payment_intents", SimCreateRequest{Amount: 700, Currency: "usd", Customer: "cus_X",
		Created: h.clock.Now().Add(-time.Hour).Unix()})
	var silent PaymentIntent
	if err := json.Unmarshal(b, &silent); st != 200 || err != nil || silent.Status != StatusSucceeded {
		t.Fatalf("silent create: %d %s", st, b)
	}
	// A silent amount change.
	st, b = h.control(t, "POST", "/_sim/payment_intents/"+dropped.ID+"/mutate", map[string]any{"amount": 999})
	if st != 200 {
		t.Fatalf("mutate %d %s", st, b)
	}
	if n, _ := h.sim.Deliver(ctx); n != 0 || len(h.hooks.got()) != 0 {
		t.Fatalf("a webhook was sent: %d", n)
	}
	got, _ := h.client.V1PaymentIntents.Retrieve(ctx, dropped.ID, nil)
	if got.Amount != 999 {
		t.Fatalf("amount %d", got.Amount)
	}
	st, b = h.control(t, "GET", "/_sim/events", nil)
	if !strings.Contains(string(b), `"state":"dropped"`) || !strings.Contains(string(b), `"state":"suppressed"`) {
		t.Fatalf("events %s", b)
	}
	// A PaymentIntent forgotten by the provider.
	if st, _ := h.control(t, "DELETE", "/_sim/payment_intents/"+silent.ID, nil); st != 200 {
		t.Fatalf("forget: %d", st)
	}
	if _, err := h.client.V1PaymentIntents.Retrieve(ctx, silent.ID, nil); err == nil {
		t.Fatal("forgotten intent still retrievable")
	}
	for pi, err := range h.client.V1PaymentIntents.List(ctx, &stripe.PaymentIntentListParams{}) {
		if err != nil || pi.ID == silent.ID {
			t.Fatalf("list after forget: %v %v", pi, err)
		}
	}
	// Paused webhooks wait, then flow on resume.
	h.control(t, "POST", "/_sim/webhooks/pause", nil)
	_, _ = h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "paused"))
	if n, _ := h.sim.Deliver(ctx); n != 0 {
		t.Fatal("sent while paused")
	}
	h.control(t, "POST", "/_sim/webhooks/resume", nil)
	st, b = h.control(t, "POST", "/_sim/webhooks/flush", nil)
	if st != 200 || !strings.Contains(string(b), `"sent":1`) {
		t.Fatalf("flush %d %s", st, b)
	}
}

func TestRefund(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pi, _ := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "r"))
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
	p.SetIdempotencyKey("refund-1")
	re, err := h.client.V1Refunds.Create(ctx, p)
	if err != nil || re.Amount != 2000 || re.Status != stripe.RefundStatusSucceeded {
		t.Fatalf("refund: %+v %v", re, err)
	}
	p2 := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
	if _, err := h.client.V1Refunds.Create(ctx, p2); err == nil {
		t.Fatal("second full refund accepted")
	}
	_, _ = h.sim.Deliver(ctx)
	evs := byID(h.hooks.got())
	last := evs[len(evs)-2] // then refund.created
	var ch stripe.Charge
	if last.Type != "charge.refunded" || json.Unmarshal(last.Data.Raw, &ch) != nil || !ch.Refunded || ch.AmountRefunded != 2000 {
		t.Fatalf("charge.refunded: %s %+v", last.Type, ch)
	}
	if evs[len(evs)-1].Type != provider.EventRefundCreated {
		t.Fatalf("last event %s, want refund.created", evs[len(evs)-1].Type)
	}
}

func TestDurableRestart(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NoSync = false })
	ctx := context.Background()
	h.control(t, "POST", "/_sim/webhooks/pause", nil)
	pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "durable"))
	if err != nil {
		t.Fatal(err)
	}
	h.close()

	h.open(t, func(c *Config) { c.NoSync = false })
	got, err := h.client.V1PaymentIntents.Retrieve(ctx, pi.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("intent lost: %v", err)
	}
	again, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "durable"))
	if err != nil || again.ID != pi.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("key lost: %v", err)
	}
	next, _ := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "after"))
	if next.ID <= pi.ID {
		t.Fatalf("id sequence went back: %s after %s", next.ID, pi.ID)
	}
	h.control(t, "POST", "/_sim/webhooks/resume", nil)
	if n, err := h.sim.Deliver(ctx); n != 2 || err != nil {
		t.Fatalf("outbox after restart sent %d %v", n, err)
	}
}

func TestStartSendsInBackground(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PollInterval = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.sim.Start(ctx)
	if _, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "bg")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for len(h.hooks.got()) == 0 {
		select {
		case <-deadline:
			t.Fatal("no delivery from the background sender")
		case <-time.After(5 * time.Millisecond): // polling a real server, not standing in for a clock
		}
	}
}

func TestSweepIdempotencyKeys(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		if st, _, b := h.post(t, "/v1/payment_intents", fmt.Sprint("old-", i), url.Values{"amount": {"1"}, "currency": {"usd"}}); st != 200 {
			t.Fatalf("%d %s", st, b)
		}
	}
	h.clock.Advance(IdempotencyKeyTTL - time.Minute)
	for i := range 3 {
		h.post(t, "/v1/payment_intents", fmt.Sprint("young-", i), url.Values{"amount": {"1"}, "currency": {"usd"}})
	}
	h.clock.Advance(2 * time.Minute)
	n, err := h.sim.SweepIdempotencyKeys()
	if err != nil || n != 5 {
		t.Fatalf("swept %d %v, want 5", n, err)
	}
	if _, hd, _ := h.post(t, "/v1/payment_intents", "young-1", url.Values{"amount": {"1"}, "currency": {"usd"}}); hd.Get("Idempotent-Replayed") != "true" {
		t.Fatal("a young key was swept")
	}
	if n, _ := h.sim.SweepIdempotencyKeys(); n != 0 {
		t.Fatalf("second sweep removed %d", n)
	}
}

// GET /v1/payment_methods/{id} names the card a confirm charges: a test card's own
// fingerprint, a registered card's brand, and one fingerprint for two payment methods
// registered as one card; it consumes no programmed decline.
func TestPaymentMethodRetrieveNamesTheCard(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	visa, err := h.client.V1PaymentMethods.Retrieve(ctx, "pm_card_visa", nil)
	if err != nil || visa.Card == nil || visa.Card.Brand != "visa" || visa.Card.Last4 != "4242" ||
		visa.Card.Fingerprint != cardFingerprint("pm_card_visa", "") {
		t.Fatalf("pm_card_visa = %+v, %v", visa, err)
	}
	for _, pm := range []string{"pm_old_card", "pm_same_card_again"} {
		if st, b := h.control(t, "POST", "/_sim/cards", map[string]any{"payment_method": pm, "brand": "mastercard",
			"fingerprint": "SameCard01", "decline_code": "insufficient_funds", "times": 1}); st != 200 {
			t.Fatalf("register %s: %d %s", pm, st, b)
		}
	}
	a, errA := h.client.V1PaymentMethods.Retrieve(ctx, "pm_old_card", nil)
	b, errB := h.client.V1PaymentMethods.Retrieve(ctx, "pm_same_card_again", nil)
	if errA != nil || errB != nil || a.Card.Fingerprint != "SameCard01" || b.Card.Fingerprint != "SameCard01" ||
		a.Card.Brand != "mastercard" || a.Card.Last4 != "4444" {
		t.Fatalf("registered cards = %+v (%v), %+v (%v)", a.Card, errA, b.Card, errB)
	}
	// The read consumed nothing: the programmed decline still comes, naming the same card.
	_, err = h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_old_card", "after-read"))
	var se *stripe.Error
	if !errors.As(err, &se) || se.DeclineCode != stripe.DeclineCodeInsufficientFunds ||
		se.PaymentMethod == nil || se.PaymentMethod.Card.Fingerprint != "SameCard01" {
		t.Fatalf("charge after the read: %v", err)
	}
	_, err = h.client.V1PaymentMethods.Retrieve(ctx, "pm_never_registered", nil)
	if !errors.As(err, &se) || se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("unknown payment method: %v", err)
	}
}
