package stripesim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/runtwice/twice/shared/provider"
)

// typesFor delivers what is due and returns the types of the events about one
// PaymentIntent, in creation order.
func (h *harness) typesFor(t *testing.T, pi string) []string {
	t.Helper()
	if _, err := h.sim.Deliver(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range byID(h.hooks.got()) {
		var obj struct {
			ID            string `json:"id"`
			PaymentIntent string `json:"payment_intent"`
		}
		_ = json.Unmarshal(ev.Data.Raw, &obj)
		if obj.ID == pi || obj.PaymentIntent == pi {
			out = append(out, string(ev.Type))
		}
	}
	return out
}

// piBody is the part of a PaymentIntent (or of an error's) these tests read.
type piBody struct {
	ID                 string `json:"id"`
	Status             string `json:"status"`
	ClientSecret       string `json:"client_secret"`
	AmountCapturable   int64  `json:"amount_capturable"`
	AmountReceived     int64  `json:"amount_received"`
	Created            int64  `json:"created"`
	CancellationReason string `json:"cancellation_reason"`
	NextAction         *struct {
		Type          string `json:"type"`
		RedirectToURL *struct {
			URL       string `json:"url"`
			ReturnURL string `json:"return_url"`
		} `json:"redirect_to_url"`
	} `json:"next_action"`
	LastPaymentError *struct {
		Type        string `json:"type"`
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
	} `json:"last_payment_error"`
	LatestCharge json.RawMessage `json:"latest_charge"`
	Error        *struct {
		Type          string `json:"type"`
		Code          string `json:"code"`
		DeclineCode   string `json:"decline_code"`
		PaymentIntent piBody `json:"payment_intent"`
	} `json:"error"`
}

func decodePI(t *testing.T, b []byte) piBody {
	t.Helper()
	var p piBody
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return p
}

func createForm(pm string, extra ...string) url.Values {
	f := url.Values{"amount": {"2000"}, "currency": {"usd"}, "payment_method": {pm}, "confirm": {"true"}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Set(extra[i], extra[i+1])
	}
	return f
}

func TestAuthenticationOnSession(t *testing.T) {
	h := newHarness(t)
	st, _, b := h.post(t, "/v1/payment_intents", "3ds-1", createForm("pm_card_threeDSecure2Required"))
	pi := decodePI(t, b)
	if st != 200 || pi.Status != StatusRequiresAction || pi.NextAction == nil || pi.NextAction.Type != "use_stripe_sdk" ||
		!strings.HasPrefix(pi.ClientSecret, pi.ID+"_secret_") || len(pi.LatestCharge) > 0 && string(pi.LatestCharge) != "null" {
		t.Fatalf("create: %d %s", st, b)
	}
	if got := h.typesFor(t, pi.ID); !slices.Equal(got, []string{provider.EventPaymentIntentRequiresAction}) {
		t.Fatalf("events %v", got)
	}
	// With a return_url the customer is redirected.
	_, _, b = h.post(t, "/v1/payment_intents", "3ds-2", createForm("pm_card_authenticationRequired", "return_url", "https://shop.example/back"))
	if r := decodePI(t, b); r.NextAction == nil || r.NextAction.Type != "redirect_to_url" || r.NextAction.RedirectToURL == nil ||
		r.NextAction.RedirectToURL.ReturnURL != "https://shop.example/back" || !strings.HasPrefix(r.NextAction.RedirectToURL.URL, "https://") {
		t.Fatalf("redirect: %s", b)
	}

	st, b = h.control(t, "POST", "/_sim/payment_intents/"+pi.ID+"/authenticate", map[string]string{"result": "succeeded"})
	if done := decodePI(t, b); st != 200 || done.Status != StatusSucceeded || done.NextAction != nil || done.AmountReceived != 2000 {
		t.Fatalf("authenticate: %d %s", st, b)
	}
	if got := h.typesFor(t, pi.ID); !slices.Equal(got, []string{provider.EventPaymentIntentRequiresAction, provider.EventPaymentIntentSucceeded}) {
		t.Fatalf("events %v", got)
	}
	// Only a payment waiting for the customer can be authenticated.
	st, b = h.control(t, "POST", "/_sim/payment_intents/"+pi.ID+"/authenticate", map[string]string{"result": "succeeded"})
	if st != 400 || !strings.Contains(string(b), "not requires_action") {
		t.Fatalf("second authenticate: %d %s", st, b)
	}
}

func TestAuthenticationFails(t *testing.T) {
	h := newHarness(t)
	_, _, b := h.post(t, "/v1/payment_intents", "3ds-f", createForm("pm_card_authenticationRequired"))
	pi := decodePI(t, b)
	st, b := h.control(t, "POST", "/_sim/payment_intents/"+pi.ID+"/authenticate", map[string]string{"result": "failed"})
	got := decodePI(t, b)
	if st != 200 || got.Status != StatusRequiresPaymentMethod || got.LastPaymentError == nil ||
		got.LastPaymentError.Code != "payment_intent_authentication_failure" || got.LastPaymentError.Type != errTypeInvalidRequest ||
		got.NextAction != nil {
		t.Fatalf("authenticate failed: %d %s", st, b)
	}
	if types := h.typesFor(t, pi.ID); !slices.Equal(types, []string{provider.EventPaymentIntentRequiresAction, provider.EventPaymentIntentPaymentFailed}) {
		t.Fatalf("events %v", types)
	}
	// A failed authentication needs a new payment method: the intent can be confirmed again.
	st, _, b = h.post(t, "/v1/payment_intents/"+pi.ID+"/confirm", "3ds-f-2", url.Values{"payment_method": {"pm_card_visa"}})
	if st != 200 || decodePI(t, b).Status != StatusSucceeded {
		t.Fatalf("confirm after failure: %d %s", st, b)
	}
}

func TestAuthenticateControlErrors(t *testing.T) {
	h := newHarness(t)
	_, _, b := h.post(t, "/v1/payment_intents", "3ds-e", createForm("pm_card_threeDSecure2Required"))
	pi := decodePI(t, b)
	tests := map[string]struct {
		path   string
		body   string
		status int
		detail string
	}{
		"unknown result": {pi.ID, `{"result":"maybe"}`, 400, "result must be succeeded or failed"},
		"no result":      {pi.ID, ``, 400, "result must be succeeded or failed"},
		"unknown field":  {pi.ID, `{"result":"succeeded","x":1}`, 400, "unknown field"},
		"malformed":      {pi.ID, `{"result":`, 400, "malformed JSON"},
		"wrong type":     {pi.ID, `{"result":1}`, 400, "wrong type"},
		"too large":      {pi.ID, `{"result":"` + strings.Repeat("a", maxControlBody) + `"}`, 400, "body over"},
		"unknown intent": {"pi_nope", `{"result":"succeeded"}`, 404, "no such payment_intent"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+"/_sim/payment_intents/"+tc.path+"/authenticate", strings.NewReader(tc.body))
			st, hdr, b := do(t, req)
			if st != tc.status || hdr.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), tc.detail) {
				t.Fatalf("%d %s %s", st, hdr.Get("Content-Type"), b)
			}
		})
	}
	// Nothing moved.
	if r, err := h.client.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil); err != nil || r.Status != StatusRequiresAction {
		t.Fatalf("after bad requests: %v %v", r.Status, err)
	}
}

// Off-session, a card that requires authentication is declined as Stripe declines it.
func TestAuthenticationRequiredOffSession(t *testing.T) {
	for _, pm := range []string{"pm_card_authenticationRequired", "pm_card_threeDSecure2Required"} {
		t.Run(pm, func(t *testing.T) {
			h := newHarness(t)
			st, _, b := h.post(t, "/v1/payment_intents", "off-1", createForm(pm, "off_session", "true"))
			p := decodePI(t, b)
			if st != 402 || p.Error == nil || p.Error.Type != errTypeCard || p.Error.Code != "authentication_required" ||
				p.Error.DeclineCode != "authentication_required" || p.Error.PaymentIntent.Status != StatusRequiresPaymentMethod {
				t.Fatalf("off-session: %d %s", st, b)
			}
			if types := h.typesFor(t, p.Error.PaymentIntent.ID); !slices.Equal(types, []string{provider.EventPaymentIntentPaymentFailed}) {
				t.Fatalf("events %v", types)
			}
		})
	}
}

func TestManualCapture(t *testing.T) {
	h := newHarness(t)
	st, _, b := h.post(t, "/v1/payment_intents", "man-1", createForm("pm_card_visa", "capture_method", "manual", "expand[0]", "latest_charge"))
	pi := decodePI(t, b)
	var ch charge
	if err := json.Unmarshal(pi.LatestCharge, &ch); st != 200 || err != nil || pi.Status != StatusRequiresCapture || pi.AmountCapturable != 2000 ||
		ch.Captured || ch.PaymentMethodDetails.Card.CaptureBefore != pi.Created+int64(AuthorizationWindow/time.Second) {
		t.Fatalf("create: %d %s", st, b)
	}
	if types := h.typesFor(t, pi.ID); !slices.Equal(types, []string{provider.EventPaymentIntentCapturableUpdated}) {
		t.Fatalf("events %v", types)
	}
	path := "/v1/payment_intents/" + pi.ID + "/capture"
	st, b = postStatus(t, h, path, "cap-1", url.Values{"amount_to_capture": {"2001"}})
	if p := decodePI(t, b); st != 400 || p.Error == nil || p.Error.Code != "amount_too_large" {
		t.Fatalf("over-capture: %d %s", st, b)
	}
	st, hdr, first := h.post(t, path, "cap-2", url.Values{"amount_to_capture": {"1500"}})
	if p := decodePI(t, first); st != 200 || p.Status != StatusSucceeded || p.AmountReceived != 1500 || p.AmountCapturable != 0 || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("capture: %d %s", st, first)
	}
	st, hdr, again := h.post(t, path, "cap-2", url.Values{"amount_to_capture": {"1500"}})
	if st != 200 || string(again) != string(first) || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s %s", st, hdr, again)
	}
	st, b = postStatus(t, h, path, "cap-2", url.Values{"amount_to_capture": {"1000"}})
	if p := decodePI(t, b); st != 400 || p.Error == nil || p.Error.Type != errTypeIdempotency {
		t.Fatalf("same key, other amount: %d %s", st, b)
	}
	st, b = postStatus(t, h, path, "cap-3", nil)
	if p := decodePI(t, b); st != 400 || p.Error == nil || p.Error.Code != "payment_intent_unexpected_state" {
		t.Fatalf("second capture: %d %s", st, b)
	}
	if types := h.typesFor(t, pi.ID); !slices.Equal(types, []string{provider.EventPaymentIntentCapturableUpdated, provider.EventChargeCaptured, provider.EventPaymentIntentSucceeded}) {
		t.Fatalf("events %v", types)
	}
	// The charge says what was taken; what was released is not refundable.
	st, b = postStatus(t, h, "/v1/refunds", "", url.Values{"payment_intent": {pi.ID}, "amount": {"1501"}})
	if p := decodePI(t, b); st != 400 || p.Error == nil || p.Error.Code != "amount_too_large" {
		t.Fatalf("refund over the captured amount: %d %s", st, b)
	}
	// A succeeded intent cannot be canceled.
	st, b = postStatus(t, h, "/v1/payment_intents/"+pi.ID+"/cancel", "cxl-0", nil)
	if p := decodePI(t, b); st != 400 || p.Error == nil || p.Error.Code != "payment_intent_unexpected_state" {
		t.Fatalf("cancel of a succeeded intent: %d %s", st, b)
	}
}

func postStatus(t *testing.T, h *harness, path, key string, form url.Values) (int, []byte) {
	t.Helper()
	st, _, b := h.post(t, path, key, form)
	return st, b
}

func TestCancelReleasesAnAuthorization(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ name, pm, extra string }{
		{"requires_capture", "pm_card_visa", "manual"},
		{"requires_action", "pm_card_threeDSecure2Required", ""},
		{"requires_payment_method", "pm_card_visa_chargeDeclined", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := createForm(tc.pm)
			if tc.extra != "" {
				form.Set("capture_method", tc.extra)
			}
			_, _, b := h.post(t, "/v1/payment_intents", "cxl-create-"+tc.name, form)
			pi := decodePI(t, b)
			if pi.ID == "" && pi.Error != nil {
				pi = pi.Error.PaymentIntent
			}
			if pi.Status != tc.name {
				t.Fatalf("status %s, want %s: %s", pi.Status, tc.name, b)
			}
			path := "/v1/payment_intents/" + pi.ID + "/cancel"
			form = url.Values{"cancellation_reason": {"abandoned"}}
			st, _, first := h.post(t, path, "cxl-"+tc.name, form)
			got := decodePI(t, first)
			if st != 200 || got.Status != StatusCanceled || got.CancellationReason != "abandoned" || got.AmountCapturable != 0 || got.NextAction != nil {
				t.Fatalf("cancel: %d %s", st, first)
			}
			st, hdr, again := h.post(t, path, "cxl-"+tc.name, form)
			if st != 200 || string(again) != string(first) || hdr.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("repeat: %d %s", st, again)
			}
			if types := h.typesFor(t, pi.ID); types[len(types)-1] != provider.EventPaymentIntentCanceled {
				t.Fatalf("events %v", types)
			}
		})
	}
}

func TestRefundsListAndLimits(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "rl"))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"payment_intent": {pi.ID}, "amount": {"500"}, "reason": {"requested_by_customer"}}
	st, hdr, first := h.post(t, "/v1/refunds", "rl-1", form)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "" || !strings.Contains(string(first), `"status":"succeeded"`) {
		t.Fatalf("refund: %d %s", st, first)
	}
	st, hdr, again := h.post(t, "/v1/refunds", "rl-1", form)
	if st != 200 || string(again) != string(first) || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s", st, again)
	}
	form.Set("amount", "600")
	if st, b := postStatus(t, h, "/v1/refunds", "rl-1", form); st != 400 || !strings.Contains(string(b), errTypeIdempotency) {
		t.Fatalf("same key, other amount: %d %s", st, b)
	}
	st, b := postStatus(t, h, "/v1/refunds", "rl-2", url.Values{"payment_intent": {pi.ID}, "amount": {"1501"}})
	if st != 400 || !strings.Contains(string(b), `"code":"amount_too_large"`) || !strings.Contains(string(b), "(1500)") {
		t.Fatalf("over-refund: %d %s", st, b)
	}
	if st, b := postStatus(t, h, "/v1/refunds", "rl-3", url.Values{"payment_intent": {pi.ID}}); st != 200 || !strings.Contains(string(b), `"amount":1500`) {
		t.Fatalf("the rest: %d %s", st, b)
	}
	if st, b := postStatus(t, h, "/v1/refunds", "rl-4", url.Values{"payment_intent": {pi.ID}}); st != 400 || !strings.Contains(string(b), "charge_already_refunded") {
		t.Fatalf("nothing left: %d %s", st, b)
	}
	var ids []string
	for r, err := range h.client.V1Refunds.List(ctx, listRefunds(pi.ID, 1)) {
		if err != nil {
			t.Fatal(err)
		}
		if r.PaymentIntent == nil || r.PaymentIntent.ID != pi.ID {
			t.Fatalf("refund of another intent: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] <= ids[1] {
		t.Fatalf("listed %v, want 2 newest first (paged one at a time)", ids)
	}
	if types := h.typesFor(t, pi.ID); !slices.Equal(types, []string{provider.EventPaymentIntentSucceeded, provider.EventChargeRefunded, provider.EventRefundCreated,
		provider.EventChargeRefunded, provider.EventRefundCreated}) {
		t.Fatalf("events %v", types)
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/refunds?payment_intent=pi_nope", nil)
	req.SetBasicAuth(DefaultAPIKey, "")
	if st, _, b := do(t, req); st != 400 || !strings.Contains(string(b), "No such payment_intent") {
		t.Fatalf("unknown intent: %d %s", st, b)
	}
}

func TestRefundFailsLater(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RefundFailureDelay = time.Minute })
	ctx := context.Background()
	pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_refundFail", "rf"))
	if err != nil || pi.Status != StatusSucceeded {
		t.Fatalf("create: %v %v", pi, err)
	}
	st, b := postStatus(t, h, "/v1/refunds", "rf-1", url.Values{"payment_intent": {pi.ID}, "amount": {"700"}})
	var re refund
	if st != 200 || json.Unmarshal(b, &re) != nil || re.Status != "succeeded" {
		t.Fatalf("refund: %d %s", st, b)
	}
	if n, err := h.sim.RunDue(); err != nil || n != 0 {
		t.Fatalf("before the delay: %d %v", n, err)
	}
	// The failure is durable: it happens after a restart too.
	h.close()
	h.open(t, func(c *Config) { c.RefundFailureDelay = time.Minute })
	h.clock.Advance(time.Minute)
	if n, err := h.sim.RunDue(); err != nil || n != 1 {
		t.Fatalf("after the delay: %d %v", n, err)
	}
	if n, _ := h.sim.RunDue(); n != 0 {
		t.Fatalf("failed twice: %d", n)
	}
	got, err := h.client.V1Refunds.Retrieve(ctx, re.ID, nil)
	if err != nil || got.Status != "failed" || got.FailureReason != refundFailureReason || got.Amount != 700 {
		t.Fatalf("refund after: %+v %v", got, err)
	}
	read, err := h.client.V1PaymentIntents.Retrieve(ctx, pi.ID, expandCharge())
	if err != nil || read.LatestCharge == nil || read.LatestCharge.AmountRefunded != 0 || read.LatestCharge.Refunded {
		t.Fatalf("charge after: %+v %v", read.LatestCharge, err)
	}
	if types := h.typesFor(t, pi.ID); !slices.Equal(types, []string{provider.EventPaymentIntentSucceeded, provider.EventChargeRefunded, provider.EventRefundCreated,
		provider.EventChargeRefundUpdated, provider.EventRefundUpdated, provider.EventRefundFailed}) {
		t.Fatalf("events %v", types)
	}
	// The amount is refundable again.
	if st, b := postStatus(t, h, "/v1/refunds", "rf-2", url.Values{"payment_intent": {pi.ID}}); st != 200 || !strings.Contains(string(b), `"amount":2000`) {
		t.Fatalf("refund again: %d %s", st, b)
	}
}

func listRefunds(pi string, limit int64) *stripe.RefundListParams {
	p := &stripe.RefundListParams{PaymentIntent: stripe.String(pi)}
	p.Limit = stripe.Int64(limit)
	return p
}

func expandCharge() *stripe.PaymentIntentRetrieveParams {
	p := &stripe.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	return p
}
