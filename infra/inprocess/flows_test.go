package inprocess

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// The payment flows merchants run, through the local stack and the simulator: a payment that
// needs the customer's authentication, an off-session charge, and manual capture.

func view(t *testing.T, a answer) payments.View {
	t.Helper()
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
	return v
}

func getFlow(t *testing.T, s *Stack, id string) (payments.View, string) {
	t.Helper()
	a := call(t, "GET", s.APIURL()+"/payments/"+id, "", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, a.status, a.body)
	}
	return view(t, a), a.body
}

func authenticate(t *testing.T, s *Stack, pi, result string) {
	t.Helper()
	a := call(t, "POST", s.SimURL()+"/_sim/payment_intents/"+pi+"/authenticate", "", fmt.Sprintf(`{"result":%q}`, result))
	if a.status >= 300 {
		t.Fatalf("authenticate %s: %d %s", result, a.status, a.body)
	}
}

// create3DS makes a payment with the card that needs 3-D Secure and checks its answer: 201
// requires_action with the client secret and the next action, replayed byte for byte.
func create3DS(t *testing.T, s *Stack, key string) payments.View {
	t.Helper()
	body := `{"amount":2500,"currency":"usd","customer":"cus_3ds","payment_method":"pm_card_threeDSecure2Required"}`
	first := call(t, "POST", s.APIURL()+"/payments", key, body)
	v := view(t, first)
	if first.status != http.StatusCreated || v.Status != provider.StatusRequiresAction || v.ClientSecret == nil ||
		!strings.HasPrefix(*v.ClientSecret, deref(v.ProviderPaymentID)+"_secret_") || v.NextAction == nil || v.NextAction.Type == "" {
		t.Fatalf("first answer %d %s", first.status, first.body)
	}
	again := call(t, "POST", s.APIURL()+"/payments", key, body)
	if again.status != first.status || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s\nfirst %s", again.status, again.body, first.body)
	}
	return v
}

func TestThreeDSecureSucceedsAfterTheCustomerAuthenticates(t *testing.T) {
	s := newStack(t, Config{})
	v := create3DS(t, s, "3ds-ok")
	if _, body := getFlow(t, s, v.ID); !strings.Contains(body, `"status":"requires_action"`) || strings.Contains(body, "secret") {
		t.Fatalf("GET while waiting: %s", body)
	}
	authenticate(t, s, deref(v.ProviderPaymentID), "succeeded")
	eventually(t, 20*time.Second, "the webhook moves the payment to succeeded", func() bool {
		got, _ := getFlow(t, s, v.ID)
		return got.Status == provider.StatusSucceeded
	})
	if _, body := getFlow(t, s, v.ID); strings.Contains(body, "next_action") || strings.Contains(body, "secret") {
		t.Fatalf("GET after success: %s", body)
	}
	// The POST's replay is still its own answer, byte for byte.
	again := call(t, "POST", s.APIURL()+"/payments", "3ds-ok", `{"amount":2500,"currency":"usd","customer":"cus_3ds","payment_method":"pm_card_threeDSecure2Required"}`)
	if view(t, again).Status != provider.StatusRequiresAction {
		t.Fatalf("replay after success: %s", again.body)
	}
	// The secret never reached the attempt log: neither our answer nor the provider's.
	for _, q := range []string{"payment_id=" + v.ID, "provider_payment_id=" + deref(v.ProviderPaymentID)} {
		a := ops(t, s, "GET", "/ops/attempts?"+q, "")
		if a.status != http.StatusOK || !strings.Contains(a.body, "payment_intents.create") && !strings.Contains(a.body, "payments.create") {
			t.Fatalf("attempts by %s: %d %s", q, a.status, a.body)
		}
		if strings.Contains(a.body, *v.ClientSecret) || strings.Contains(a.body, strings.TrimPrefix(*v.ClientSecret, deref(v.ProviderPaymentID))) {
			t.Fatalf("the attempt log holds the client secret: %s", a.body)
		}
	}
}

func TestThreeDSecureFailureIsAnAuthDeclineNotRetried(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
	v := create3DS(t, s, "3ds-fail")
	authenticate(t, s, deref(v.ProviderPaymentID), "failed")
	eventually(t, 20*time.Second, "the webhook moves the payment to declined", func() bool {
		got, _ := getFlow(t, s, v.ID)
		return got.Status == provider.StatusDeclined
	})
	got, _ := getFlow(t, s, v.ID)
	if deref(got.DeclineClass) != "auth" || deref(got.DeclineCode) != "payment_intent_authentication_failure" {
		t.Fatalf("declined as %s / %s", deref(got.DeclineClass), deref(got.DeclineCode))
	}
	expectAskTheCustomer(t, s, v)
}

func TestOffSessionAuthenticationRequiredIsA402ForTheCustomer(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
	body := `{"amount":2500,"currency":"usd","customer":"cus_off","payment_method":"pm_card_authenticationRequired","off_session":true}`
	a := call(t, "POST", s.APIURL()+"/payments", "off-1", body)
	v := view(t, a)
	if a.status != http.StatusPaymentRequired || v.Status != provider.StatusDeclined || deref(v.DeclineCode) != "authentication_required" ||
		deref(v.DeclineClass) != "auth" || v.ClientSecret != nil {
		t.Fatalf("%d %s", a.status, a.body)
	}
	expectAskTheCustomer(t, s, v)
}

// expectAskTheCustomer: the recovery stops at once with a dead letter that tells the operator
// to ask the customer, and the provider saw no second charge.
func expectAskTheCustomer(t *testing.T, s *Stack, v payments.View) {
	t.Helper()
	ex := execution(t, s)
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	var recs []map[string]any
	eventually(t, 10*time.Second, "a dead-letter record opens", func() bool {
		recs = opsList(t, s, "source=recovery")
		return len(recs) == 1
	})
	action, _ := recs[0]["suggested_action"].(string)
	if recs[0]["payment_id"] != v.ID || !strings.Contains(strings.ToLower(action), "customer") {
		t.Fatalf("record %v", recs[0])
	}
	got, _ := getFlow(t, s, v.ID)
	if got.Recovery == nil || got.Recovery.State != payments.RecoveryStopped || got.Recovery.Attempts != 1 {
		t.Fatalf("recovery %+v", got.Recovery)
	}
	// One failed attempt at the provider, and no charge after it.
	if got := simEvents(t, s, deref(v.ProviderPaymentID)); strings.Count(fmt.Sprint(got), "payment_failed") != 1 || strings.Contains(fmt.Sprint(got), "succeeded") {
		t.Fatalf("attempts at the provider: %v", got)
	}
}

func TestManualCaptureThenCaptureAndCancel(t *testing.T) {
	s := newStack(t, Config{})
	hold := func(key string) payments.View {
		a := call(t, "POST", s.APIURL()+"/payments", key, `{"amount":2000,"currency":"usd","customer":"cus_cap","payment_method":"pm_card_visa","capture_method":"manual"}`)
		v := view(t, a)
		if a.status != http.StatusCreated || v.Status != provider.StatusRequiresCapture || v.CaptureMethod != "manual" ||
			v.AmountCapturable != 2000 || v.CaptureBefore == nil {
			t.Fatalf("%d %s", a.status, a.body)
		}
		return v
	}
	one, two := hold("cap-1"), hold("cap-2")
	if got, _ := getFlow(t, s, one.ID); got.CaptureBefore == nil || *got.CaptureBefore != *one.CaptureBefore {
		t.Fatalf("GET shows no capture_before: %+v", got)
	}

	first := call(t, "POST", s.APIURL()+"/payments/"+one.ID+"/capture", "cap-1-take", `{"amount_to_capture":1500}`)
	c := view(t, first)
	if first.status != http.StatusOK || c.Status != provider.StatusSucceeded || c.AmountReceived != 1500 {
		t.Fatalf("capture %d %s", first.status, first.body)
	}
	again := call(t, "POST", s.APIURL()+"/payments/"+one.ID+"/capture", "cap-1-take", `{"amount_to_capture":1500}`)
	if again.status != http.StatusOK || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("capture replay %d %s", again.status, again.body)
	}
	if a := call(t, "POST", s.APIURL()+"/payments/"+one.ID+"/capture", "cap-1-take", `{"amount_to_capture":1000}`); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("another body under the key: %d %s", a.status, a.body)
	}
	if got := simEvents(t, s, deref(one.ProviderPaymentID)); strings.Count(fmt.Sprint(got), "succeeded") != 1 {
		t.Fatalf("events at the provider: %v", got)
	}

	cx := call(t, "POST", s.APIURL()+"/payments/"+two.ID+"/cancel", "cap-2-drop", `{"reason":"requested_by_customer"}`)
	if v := view(t, cx); cx.status != http.StatusOK || v.Status != provider.StatusCanceled || v.CancellationReason != "requested_by_customer" {
		t.Fatalf("cancel %d %s", cx.status, cx.body)
	}
	// A capture of the canceled one: the payment's state refuses it.
	if a := call(t, "POST", s.APIURL()+"/payments/"+two.ID+"/capture", "cap-2-late", ""); a.status != http.StatusConflict ||
		!strings.Contains(a.body, "payment-state") {
		t.Fatalf("capture after cancel: %d %s", a.status, a.body)
	}
	// The provider's events agree, and GET shows both.
	eventually(t, 20*time.Second, "the events settle both payments", func() bool {
		g1, _ := getFlow(t, s, one.ID)
		g2, _ := getFlow(t, s, two.ID)
		return g1.Status == provider.StatusSucceeded && g2.Status == provider.StatusCanceled
	})
}

// TestPaymentLeftWaitingIsCanceledPastTheCustomerWindow: reconciliation finds a payment still
// in requires_action past the customer window and cancels it at the provider, through the
// outbox and the resolve queue; the payment reads canceled, abandoned, and a second run of
// the same window changes nothing.
func TestPaymentLeftWaitingIsCanceledPastTheCustomerWindow(t *testing.T) {
	s := newStack(t, Config{CustomerWindow: 2 * time.Second, ResolveDelay: 10 * time.Millisecond, ReconcileEvery: -1})
	start := s.clock.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	v := create3DS(t, s, "3ds-walked-away")
	waited := create3DS(t, s, "3ds-came-back")
	authenticate(t, s, deref(waited.ProviderPaymentID), "succeeded")
	created := s.clock.Now()
	eventually(t, 20*time.Second, "the customer window passes", func() bool {
		return s.clock.Now().Sub(created) > 3*time.Second
	})
	window := fmt.Sprintf(`{"from":%q,"to":%q}`, start.Format(time.RFC3339), s.clock.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
	if a := ops(t, s, "POST", "/ops/reconcile", window); a.status != http.StatusOK || !strings.Contains(a.body, `"healed":{"stuck":1}`) {
		t.Fatalf("reconcile: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the payment is canceled", func() bool {
		got, _ := getFlow(t, s, v.ID)
		return got.Status == provider.StatusCanceled
	})
	got, _ := getFlow(t, s, v.ID)
	if got.CancellationReason != "abandoned" || got.NextAction != nil {
		t.Fatalf("canceled payment %+v", got)
	}
	if ev := simEvents(t, s, deref(v.ProviderPaymentID)); !strings.Contains(fmt.Sprint(ev), "canceled") {
		t.Fatalf("the provider did not cancel: %v", ev)
	}
	if other, _ := getFlow(t, s, waited.ID); other.Status != provider.StatusSucceeded {
		t.Fatalf("the payment the customer completed: %s", other.Status)
	}
	if recs := opsList(t, s, "source=reconciliation"); len(recs) != 0 {
		t.Fatalf("an auto-cancel needs nobody, yet records opened: %v", recs)
	}
}
