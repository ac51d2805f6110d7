package inprocess

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/logs/logstest"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/redact"
)

// opsJSON GETs from the operator API with the bearer token and decodes its JSON answer into v.
func opsJSON(t *testing.T, s *Stack, path string, v any) int {
	t.Helper()
	a := ops(t, s, "GET", path, "")
	if a.status == http.StatusOK && v != nil {
		if err := json.Unmarshal([]byte(a.body), v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, a.body)
		}
	}
	return a.status
}

func outcomes(as []attempts.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Operation+":"+a.Result)
	}
	return out
}

func hasAttempt(as []attempts.Attempt, op, outcome string) bool {
	for _, a := range as {
		if a.Operation == op && a.Result == outcome {
			return true
		}
	}
	return false
}

// The README's timeout example: the provider charges, then the call times out; the API answers
// 202. The caller's own key and the payment id each find the timed-out call, and the API
// request that started it.
func TestTimedOutCallFoundByCallerKeyAndPaymentID(t *testing.T) {
	s := newStack(t, Config{ProviderTimeout: 300 * time.Millisecond, ResolveDelay: 50 * time.Millisecond})
	armFault(t, s.SimURL(), "timeout_after_effect", 1)
	first := call(t, "POST", s.APIURL()+"/payments", "order-1003",
		`{"amount":2000,"currency":"usd","customer":"cus_123","payment_method":"pm_card_visa"}`)
	var v payments.View
	if err := json.Unmarshal([]byte(first.body), &v); err != nil || first.status != http.StatusAccepted {
		t.Fatalf("first answer %d %s", first.status, first.body)
	}
	eventually(t, 20*time.Second, "the pending payment resolves", func() bool {
		return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
	})

	var byKey opsapi.Lookup
	if code := opsJSON(t, s, "/ops/attempts?idempotency_key=order-1003", &byKey); code != 200 {
		t.Fatalf("lookup by key: %d", code)
	}
	if byKey.PaymentID != v.ID || byKey.Scope != "local" {
		t.Errorf("the key resolved to %q in %q, want %s in local", byKey.PaymentID, byKey.Scope, v.ID)
	}
	for _, want := range [][2]string{{"payment_intents.create", attempts.ResultTimeout}, {"payments.create", attempts.ResultOK}} {
		if !hasAttempt(byKey.Attempts, want[0], want[1]) {
			t.Errorf("by the caller's key: no %s %s in %v", want[0], want[1], outcomes(byKey.Attempts))
		}
	}
	var byID opsapi.Lookup
	opsJSON(t, s, "/ops/attempts?payment_id="+v.ID, &byID)
	if !hasAttempt(byID.Attempts, "payment_intents.create", attempts.ResultTimeout) {
		t.Errorf("by payment id: no timed-out create in %v", outcomes(byID.Attempts))
	}
	// The simulator's webhook for the charge that happened is filed under the payment too.
	if !hasAttempt(byID.Attempts, "webhook stripe", attempts.ResultOK) {
		t.Errorf("by payment id: no webhook in %v", outcomes(byID.Attempts))
	}
	var pi string
	for _, a := range byID.Attempts {
		if a.ProviderPaymentID != "" {
			pi = a.ProviderPaymentID
		}
	}
	var byPI opsapi.Lookup
	if pi == "" || opsJSON(t, s, "/ops/attempts?provider_payment_id="+pi, &byPI) != 200 || len(byPI.Attempts) == 0 {
		t.Errorf("by provider payment id %q: %v", pi, outcomes(byPI.Attempts))
	}

	var tl opsapi.Timeline
	if code := opsJSON(t, s, "/ops/payments/"+v.ID+"/timeline", &tl); code != 200 {
		t.Fatalf("timeline: %d", code)
	}
	var kinds []string
	sawTimeout := false
	for i, r := range tl.Rows {
		kinds = append(kinds, r.Kind+":"+r.Result)
		if i > 0 && r.At.Before(tl.Rows[i-1].At) {
			t.Errorf("row %d at %s is before row %d", i, r.At, i-1)
		}
		if r.Result == attempts.ResultTimeout {
			sawTimeout = true
			if r.Attempt == nil || !strings.Contains(r.Attempt.RequestBody, "amount=2000") || strings.Contains(r.Duration, "ms") && strings.Contains(r.Duration, ".") && len(r.Duration) > 8 {
				t.Errorf("timed-out row without its request, or a Go duration: %+v", r)
			}
		}
	}
	if !sawTimeout || tl.Rows[0].Kind != opsapi.RowAPI || !strings.Contains(strings.Join(kinds, " "), "webhook:ok") || !hasTitle(tl, "webhook payment_intent.succeeded") {
		t.Errorf("timeline rows: %v", kinds)
	}
}

// A forged delivery claiming a real payment's id is refused, quarantined, and shown in that
// payment's lookups only as a count; a 200 KiB claimed id gives capped log lines.
func TestForgedDeliveriesQuarantined(t *testing.T) {
	var logs logstest.Buffer
	s := newStack(t, Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	a := call(t, "POST", s.APIURL()+"/payments", "order-real", paymentBody("pm_card_visa"))
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusCreated {
		t.Fatalf("payment: %d %s", a.status, a.body)
	}
	forged := `{"id":"evt_forged_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_forged","object":"payment_intent","metadata":{"twice_payment_id":"` + v.ID + `"}}}}`
	req, _ := http.NewRequest("POST", s.APIURL()+"/webhooks/stripe", strings.NewReader(forged))
	req.Header.Set("Stripe-Signature", "t=1,v1=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("forged delivery: %d", resp.StatusCode)
	}
	var byID opsapi.Lookup
	opsJSON(t, s, "/ops/attempts?payment_id="+v.ID, &byID)
	for _, at := range byID.Attempts {
		if at.Refused || at.Result == attempts.ResultRejectedSignature || at.EventID == "evt_forged_1" {
			t.Errorf("the forged delivery is filed as the payment's attempt: %+v", at)
		}
	}
	if byID.UnverifiedClaims != 1 || byID.Notice == "" {
		t.Errorf("payment lookup: %d unverified claims, notice %q", byID.UnverifiedClaims, byID.Notice)
	}
	var byEvent opsapi.Lookup
	opsJSON(t, s, "/ops/attempts?event_id=evt_forged_1", &byEvent)
	if len(byEvent.Attempts) != 0 || byEvent.UnverifiedClaims != 1 {
		t.Errorf("event lookup: %v, %d claims", outcomes(byEvent.Attempts), byEvent.UnverifiedClaims)
	}
	var tl opsapi.Timeline
	opsJSON(t, s, "/ops/payments/"+v.ID+"/timeline", &tl)
	for _, r := range tl.Rows {
		if r.Kind == opsapi.RowRefused || r.Result == attempts.ResultRejectedSignature {
			t.Errorf("the forged delivery is in the timeline: %+v", r)
		}
	}
	if tl.UnverifiedClaims != 1 {
		t.Errorf("timeline: %d unverified claims", tl.UnverifiedClaims)
	}

	// A Standard Webhooks delivery claiming a 200 KiB id: refused, stored (capped), and every
	// log line stays short.
	huge := "msg_" + strings.Repeat("A", 200<<10)
	req, _ = http.NewRequest("POST", s.APIURL()+"/webhooks/standard", strings.NewReader(`{"type":"x"}`))
	req.Header.Set("Webhook-Id", huge)
	req.Header.Set("Webhook-Timestamp", "1")
	req.Header.Set("Webhook-Signature", "v1,AAAA")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("huge id: %d", resp.StatusCode)
	}
	var big opsapi.Lookup
	if code := opsJSON(t, s, "/ops/attempts?event_id="+url.QueryEscape(huge[:200]), &big); code != 200 || len(big.Attempts) != 0 {
		t.Errorf("lookup by a prefix of the huge id: %d %v", code, outcomes(big.Attempts))
	}
	var refused attempts.Page
	if code := opsJSON(t, s, "/ops/refused?day="+s.clock.Now().UTC().Format("2006-01-02"), &refused); code != 200 || len(refused.Attempts) != 2 {
		t.Fatalf("refused partition: %d, %d entries", code, len(refused.Attempts))
	}
	for _, r := range refused.Attempts {
		if r.BodySHA256 == "" || r.Source == "" || !r.Refused {
			t.Errorf("refused entry lacks its hash or source: %+v", r)
		}
		for _, c := range r.Claimed {
			if len(c) > redact.MaxLogField+32 {
				t.Errorf("claimed id stored at %d bytes", len(c))
			}
		}
	}
	// An Idempotency-Key that is a card number: the keeper's, the payments' and the attempt
	// log's lines all mask it, and the caller's key still finds the payment.
	cardKey := "4242-4242-4242-4242"
	if a := call(t, "POST", s.APIURL()+"/payments", cardKey, paymentBody("pm_card_visa")); a.status != http.StatusCreated {
		t.Fatalf("card-number key: %d %s", a.status, a.body)
	}
	var byCardKey opsapi.Lookup
	if opsJSON(t, s, "/ops/attempts?idempotency_key="+url.QueryEscape(cardKey), &byCardKey); len(byCardKey.Attempts) == 0 {
		t.Errorf("the card-number key finds nothing")
	}
	for _, at := range byCardKey.Attempts {
		if strings.Contains(at.IdempotencyKey, "4242-4242") {
			t.Errorf("stored key %q", at.IdempotencyKey)
		}
	}
	if l := logs.String(); strings.Contains(l, "4242-4242-4242-4242") || !strings.Contains(l, "[card ****4242]") {
		t.Errorf("the card-number key is logged unmasked, or not at all")
	}
	sawCapped := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 4<<10 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
		if strings.Contains(line, "webhook rejected") && strings.Contains(line, "msg_AAAA") && strings.Contains(line, "bytes]") {
			sawCapped = true
		}
	}
	if !sawCapped {
		t.Errorf("no capped log line names the huge claimed id")
	}
}

func hasTitle(tl opsapi.Timeline, title string) bool {
	for _, r := range tl.Rows {
		if r.Title == title {
			return true
		}
	}
	return false
}

// Two orders whose numeric keys pass the Luhn check and end in the same four digits (both
// shown as "[card ****0042]"): each key's lookup finds its own payment and never the other's.
// Each lookup comes straight after the answers: it finds the exchange, which the stack stores
// just behind its answer (freshAttempts).
func TestNumericKeysFindOnlyTheirOwnPayment(t *testing.T) {
	s := newStack(t, Config{})
	ids := map[string]string{}
	for _, key := range []string{"1000000090042", "1000000170042"} {
		a := call(t, "POST", s.APIURL()+"/payments", key, paymentBody("pm_card_visa"))
		var v payments.View
		if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusCreated {
			t.Fatalf("%s: %d %s", key, a.status, a.body)
		}
		ids[key] = v.ID
	}
	for key, id := range ids {
		var got opsapi.Lookup
		if code := opsJSON(t, s, "/ops/attempts?idempotency_key="+key, &got); code != 200 {
			t.Fatalf("lookup %s: %d", key, code)
		}
		if !hasAttempt(got.Attempts, "payments.create", attempts.ResultOK) {
			t.Errorf("lookup %s: no payments.create in %v", key, outcomes(got.Attempts))
		}
		for _, a := range got.Attempts {
			if a.PaymentID != id {
				t.Errorf("lookup %s (payment %s) shows %s of payment %s", key, id, a.Operation, a.PaymentID)
			}
		}
	}
}
