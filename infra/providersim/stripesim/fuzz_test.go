package stripesim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzParams feeds raw form bodies to every Stripe parameter parser: none may panic,
// and what they accept must respect Stripe's limits.
func FuzzParams(f *testing.F) {
	for _, s := range []string{
		"amount=2000&currency=usd&customer=cus_A&payment_method=pm_card_visa&confirm=true&off_session=true",
		"amount=1&currency=eur&metadata[invoice]=inv_1&expand[0]=latest_charge&expand[]=customer",
		"limit=100&starting_after=pi_1&created[gte]=10&created[lt]=20&customer=cus_A",
		"created=5&ending_before=pi_x", "payment_intent=pi_1&amount=5&reason=duplicate",
		"types[0]=charge.refunded&types[1]=charge.dispute.*&delivery_success=false&created[gte]=1",
		"type=payment_intent.succeeded&delivery_success=yes", "amount_to_capture=1500&expand[0]=latest_charge",
		"amount_to_capture=-3", "payment_intent=pi_1&limit=3&starting_after=re_1", "return_url=https://shop.example/back&amount=1&currency=usd",
		"return_url=javascript:alert(1)", "amount=%zz", "metadata[a][b]=1", "created[gt]=9223372036854775807", "[x]=1", "a]=1", "limit=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if p, perr := parseCreate(v); perr == nil {
			if p.Amount < 1 || p.Amount > maxAmount || !validCurrency(p.Currency) || len(p.Metadata) > maxMetadataKeys {
				t.Fatalf("accepted invalid create %q: %+v", raw, p)
			}
			if p.Confirm && p.PaymentMethod == "" {
				t.Fatalf("accepted confirm without payment_method: %q", raw)
			}
		} else if perr.Message == "" || perr.Code == "" {
			t.Fatalf("error without message or code for %q", raw)
		}
		_, _ = parseConfirm(v)
		if p, perr := parseList(v); perr == nil && (p.Limit < 1 || p.Limit > 100) {
			t.Fatalf("accepted limit %d", p.Limit)
		}
		if p, perr := parseRefund(v); perr == nil && p.PaymentIntent == "" && p.Charge == "" {
			t.Fatalf("accepted refund without target: %q", raw)
		}
		if p, perr := parseCapture(v); perr == nil && p.AmountToCapture < 0 {
			t.Fatalf("accepted capture %+v", p)
		}
		if p, perr := parseRefundList(v); perr == nil && (p.Limit < 1 || p.Limit > 100 || p.StartingAfter != "" && p.EndingBefore != "") {
			t.Fatalf("accepted refund list %+v", p)
		}
		if p, perr := parseEventList(v); perr == nil && (p.Limit < 1 || p.Limit > 100 || len(p.Types) > 21 ||
			p.StartingAfter != "" && p.EndingBefore != "") {
			t.Fatalf("accepted event list %+v", p)
		}
	})
}

// FuzzControl feeds raw JSON to every /_sim control parser; bad input is a controlError
// (a 400), never a panic.
func FuzzControl(f *testing.F) {
	for _, s := range []string{
		`{"path_prefix":"/v1/payment_intents","fault":"timeout_after_effect","count":1}`,
		`{"path_prefix":"/v1/","fault":"http_429","count":2,"retry_after_s":3}`,
		`{"path_prefix":"/v1/","fault":"latency","latency_ms":5}`,
		`{"event_id":"evt_1","times":3,"shuffle":true,"delay_ms":100}`,
		`{"payment_method":"pm_x","decline_code":"insufficient_funds","times":2,"network_advice_code":"24"}`,
		`{"rate":0.3,"seed":18}`, `{"count":2,"rate":1}`, `{"status":"needs_response","evidence_due_in_s":86400}`,
		``, `[]`, `{"count":-1}`, `{"fault":"http_500"} {}`, `{"times":1e99}`,
		`{"result":"succeeded"}`, `{"result":"failed"}`, `{"result":"Succeeded"}`, `{"result":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if fault, err := parseFault(strings.NewReader(raw)); err == nil {
			if fault.Count < 1 || !strings.HasPrefix(fault.PathPrefix, "/") {
				t.Fatalf("accepted fault %+v", fault)
			}
		} else if _, ok := err.(*controlError); !ok {
			t.Fatalf("not a controlError: %v", err)
		}
		if q, err := parseReplay(strings.NewReader(raw)); err == nil && (q.Times < 1 || q.Times > 100 || q.DelayMS < 0) {
			t.Fatalf("accepted replay %+v", q)
		}
		if rule, err := parseCard(strings.NewReader(raw)); err == nil && rule.Times > 0 && rule.Decline == nil {
			t.Fatalf("accepted card rule without a decline: %+v", rule)
		}
		var dq DropRequest
		if decodeControl(strings.NewReader(raw), &dq) == nil {
			if n, rule, err := parseDrop(dq); err == nil && (n < 0 || rule.Rate < 0 || rule.Rate > 1) {
				t.Fatalf("accepted drop %d %+v", n, rule)
			}
		}
		var dr DisputeRequest
		_ = decodeControl(strings.NewReader(raw), &dr)
		if q, err := parseAuthenticate(strings.NewReader(raw)); err == nil && q.Result != "succeeded" && q.Result != "failed" {
			t.Fatalf("accepted authenticate %+v", q)
		} else if err != nil {
			if _, ok := err.(*controlError); !ok {
				t.Fatalf("not a controlError: %v", err)
			}
		}
	})
}

// FuzzCreateHandler drives POST /v1/payment_intents end to end: every answer is a
// Stripe JSON body with a status Stripe would use.
func FuzzCreateHandler(f *testing.F) {
	f.Add("amount=100&currency=usd&payment_method=pm_card_visa&confirm=true", "k1")
	f.Add("amount=100&currency=usd&payment_method=pm_card_visa_chargeDeclined&confirm=true", "k2")
	f.Add("amount=-1", "")
	f.Add("metadata[%ff]=1&amount=1&currency=usd", "k3")
	sim, err := New(Config{DataDir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = sim.Close() })
	f.Fuzz(func(t *testing.T, body, key string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/payment_intents", strings.NewReader(body))
		req.SetBasicAuth(DefaultAPIKey, "")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 402:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) || (rec.Code != 200 && !bytes.Contains(rec.Body.Bytes(), []byte(`"error"`))) {
			t.Fatalf("not a Stripe body: %s", rec.Body)
		}
	})
}

// FuzzPaymentMethodRetrieve feeds ids and query strings to GET /v1/payment_methods/{id}: the
// answer is a PaymentMethod with a card fingerprint, or a Stripe error; never a 500.
func FuzzPaymentMethodRetrieve(f *testing.F) {
	f.Add("pm_card_visa", "")
	f.Add("pm_card_mastercard", "expand[]=customer")
	f.Add("pm_unknown", "limit=3")
	f.Add("%ff%00", "expand=%zz")
	sim, err := New(Config{DataDir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = sim.Close() })
	f.Fuzz(func(t *testing.T, id, query string) {
		if id == "" || strings.ContainsAny(id, "/?#") {
			return // another route
		}
		target := "/v1/payment_methods/" + url.PathEscape(id)
		if query != "" {
			target += "?" + url.PathEscape(query)
		}
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.SetBasicAuth(DefaultAPIKey, "")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			var pm PaymentMethod
			if err := json.Unmarshal(rec.Body.Bytes(), &pm); err != nil || pm.ID != id || pm.Card.Fingerprint == "" || pm.Card.Brand == "" {
				t.Fatalf("200 for %q without a card: %s", id, rec.Body)
			}
		case 400, 404:
			if !bytes.Contains(rec.Body.Bytes(), []byte(`"error"`)) {
				t.Fatalf("not a Stripe error: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d for %q?%q: %s", rec.Code, id, query, rec.Body)
		}
	})
}
