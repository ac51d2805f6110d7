package payments

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRequiresActionAnswersWithTheClientSecretOnce: a payment waiting for the customer is 201
// requires_action with client_secret and next_action; the replay is the same bytes; GET shows
// the status and the next action but never the secret, and neither does the event feed.
func TestRequiresActionAnswersWithTheClientSecretOnce(t *testing.T) {
	f := newFixture(t)
	first := f.do(t, "POST", "/payments", "k-3ds", body("pm_3ds"))
	var v View
	if err := json.Unmarshal(first.Body.Bytes(), &v); err != nil || first.Code != http.StatusCreated {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	if v.Status != StatusRequiresAction || v.ClientSecret == nil || !strings.HasSuffix(*v.ClientSecret, "_secret_s3cr3t") ||
		v.NextAction == nil || v.NextAction.Type != "use_stripe_sdk" {
		t.Fatalf("answer %s", first.Body)
	}
	again := f.do(t, "POST", "/payments", "k-3ds", body("pm_3ds"))
	if again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Code, again.Body)
	}
	get := f.do(t, "GET", "/payments/"+v.ID, "", "")
	if get.Code != http.StatusOK || strings.Contains(get.Body.String(), "secret") ||
		!strings.Contains(get.Body.String(), `"status":"requires_action"`) || !strings.Contains(get.Body.String(), `"next_action":{"type":"use_stripe_sdk"}`) {
		t.Fatalf("GET %d %s", get.Code, get.Body)
	}
	f.drain(t)
	for id, c := range f.changes {
		if c.Payment.ClientSecret != nil {
			t.Fatalf("change %s carries the client secret", id)
		}
	}
	if len(f.declines.ids) != 0 || len(f.jobs.list) != 0 {
		t.Fatalf("follow-ons for a payment waiting on its customer: %v %v", f.declines.ids, f.jobs.list)
	}
}

// TestOffSessionDeclinesInsteadOfWaiting: the same card off-session is a decline (402) that
// starts recovery, which classifies it.
func TestOffSessionDeclinesInsteadOfWaiting(t *testing.T) {
	f := newFixture(t)
	b := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_3ds","off_session":true}`
	a := f.do(t, "POST", "/payments", "k-off", b)
	if a.Code != http.StatusPaymentRequired || !strings.Contains(a.Body.String(), `"decline_code":"authentication_required"`) ||
		strings.Contains(a.Body.String(), "client_secret") {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	f.drain(t)
	if len(f.declines.ids) != 1 {
		t.Fatalf("recovery starts %v", f.declines.ids)
	}
}

// TestManualCaptureHolds: capture_method manual is requires_capture with the hold in the answer.
func TestManualCaptureHolds(t *testing.T) {
	f := newFixture(t)
	b := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_hold","capture_method":"manual"}`
	a := f.do(t, "POST", "/payments", "k-hold", b)
	var v View
	if err := json.Unmarshal(a.Body.Bytes(), &v); err != nil || a.Code != http.StatusCreated {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	if v.Status != StatusRequiresCapture || v.CaptureMethod != CaptureManual || v.AmountCapturable != 1500 ||
		v.CaptureBefore == nil || *v.CaptureBefore != "2026-12-06T10:00:00Z" {
		t.Fatalf("answer %s", a.Body)
	}
}

// TestDefaultsAreTheSameRequest: spelling out a default is the same request under one key.
func TestDefaultsAreTheSameRequest(t *testing.T) {
	f := newFixture(t)
	if a := f.do(t, "POST", "/payments", "k-def", body("pm_card_visa")); a.Code != http.StatusCreated {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	spelled := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","off_session":false,"capture_method":"automatic","metadata":{}}`
	if a := f.do(t, "POST", "/payments", "k-def", spelled); a.Code != http.StatusCreated || a.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	changed := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","off_session":true}`
	if a := f.do(t, "POST", "/payments", "k-def", changed); a.Code != http.StatusUnprocessableEntity || !strings.Contains(a.Body.String(), "off_session") {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
}
