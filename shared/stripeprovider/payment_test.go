package stripeprovider

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/stripe/stripe-go/v82"
)

func TestToStatus(t *testing.T) {
	declined := &stripe.Error{Type: stripe.ErrorTypeCard, Code: "card_declined"}
	tests := map[string]struct {
		pi   stripe.PaymentIntent
		want provider.Status
	}{
		"succeeded":                     {stripe.PaymentIntent{Status: "succeeded"}, provider.StatusSucceeded},
		"succeeded and refunded":        {stripe.PaymentIntent{Status: "succeeded", LatestCharge: &stripe.Charge{Refunded: true}}, provider.StatusRefunded},
		"processing":                    {stripe.PaymentIntent{Status: "processing"}, provider.StatusProcessing},
		"requires_capture":              {stripe.PaymentIntent{Status: "requires_capture"}, provider.StatusRequiresCapture},
		"requires_payment_method fresh": {stripe.PaymentIntent{Status: "requires_payment_method"}, provider.StatusRequiresAction},
		"requires_payment_method after a decline": {
			stripe.PaymentIntent{Status: "requires_payment_method", LastPaymentError: declined}, provider.StatusDeclined},
		"requires_confirmation": {stripe.PaymentIntent{Status: "requires_confirmation"}, provider.StatusRequiresAction},
		"requires_action":       {stripe.PaymentIntent{Status: "requires_action"}, provider.StatusRequiresAction},
		"canceled":              {stripe.PaymentIntent{Status: "canceled"}, provider.StatusCanceled},
		"a future status":       {stripe.PaymentIntent{Status: "requires_something_new"}, provider.StatusProcessing},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := toStatus(&tc.pi); got != tc.want {
				t.Fatalf("toStatus(%s) = %s, want %s", tc.pi.Status, got, tc.want)
			}
		})
	}
}

// No Stripe state maps to the payments API's "pending" (an outcome we do not know).
func TestNoStripeStatusIsPending(t *testing.T) {
	for _, st := range []stripe.PaymentIntentStatus{"requires_payment_method", "requires_confirmation", "requires_action",
		"processing", "requires_capture", "canceled", "succeeded", "something_new", ""} {
		if got := toStatus(&stripe.PaymentIntent{Status: st}); got == "pending" || got == "" {
			t.Errorf("toStatus(%q) = %q", st, got)
		}
	}
}

// Stripe's shapes for the payment flows, decoded by stripe-go and mapped.
func TestToPaymentFlows(t *testing.T) {
	tests := map[string]struct {
		body  string
		check func(t *testing.T, p provider.Payment)
	}{
		"requires_action with use_stripe_sdk": {
			`{"id":"pi_3a","object":"payment_intent","amount":2000,"currency":"usd","status":"requires_action",
			  "client_secret":"pi_3a_secret_Xy","capture_method":"automatic","created":1790000000,
			  "next_action":{"type":"use_stripe_sdk","use_stripe_sdk":{"type":"three_d_secure_redirect","source":"src_1"}}}`,
			func(t *testing.T, p provider.Payment) {
				if p.Status != provider.StatusRequiresAction || p.ClientSecret.Reveal() != "pi_3a_secret_Xy" ||
					p.NextAction == nil || p.NextAction.Type != "use_stripe_sdk" || p.NextAction.RedirectURL != "" {
					t.Fatalf("payment = %+v, next action %+v", p, p.NextAction)
				}
			},
		},
		"requires_action with a redirect": {
			`{"id":"pi_3b","object":"payment_intent","amount":2000,"currency":"usd","status":"requires_action",
			  "client_secret":"pi_3b_secret_Xy","next_action":{"type":"redirect_to_url",
			  "redirect_to_url":{"url":"https://hooks.stripe.com/3d_secure_2/hosted?x=1","return_url":"https://shop.example/back"}}}`,
			func(t *testing.T, p provider.Payment) {
				if p.NextAction == nil || p.NextAction.Type != "redirect_to_url" || p.NextAction.RedirectURL != "https://hooks.stripe.com/3d_secure_2/hosted?x=1" {
					t.Fatalf("next action = %+v", p.NextAction)
				}
			},
		},
		"a succeeded payment hands out no secret": {
			`{"id":"pi_3c","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded","client_secret":"pi_3c_secret_Xy","amount_received":2000}`,
			func(t *testing.T, p provider.Payment) {
				if p.ClientSecret != "" || p.NextAction != nil || p.AmountReceived != 2000 {
					t.Fatalf("payment = %+v", p)
				}
			},
		},
		"requires_capture with the authorization's expiry": {
			`{"id":"pi_3d","object":"payment_intent","amount":2000,"currency":"usd","status":"requires_capture","capture_method":"manual",
			  "amount_capturable":2000,"latest_charge":{"id":"ch_3d","object":"charge","amount":2000,"captured":false,
			  "payment_method_details":{"type":"card","card":{"brand":"visa","capture_before":1790604800}}}}`,
			func(t *testing.T, p provider.Payment) {
				if p.Status != provider.StatusRequiresCapture || p.CaptureMethod != provider.CaptureManual || p.AmountCapturable != 2000 ||
					p.LatestCharge != "ch_3d" || !p.CaptureBefore.Equal(time.Unix(1790604800, 0)) || p.ClientSecret != "" {
					t.Fatalf("payment = %+v", p)
				}
			},
		},
		"canceled with a reason": {
			`{"id":"pi_3e","object":"payment_intent","amount":2000,"currency":"usd","status":"canceled","cancellation_reason":"abandoned"}`,
			func(t *testing.T, p provider.Payment) {
				if p.Status != provider.StatusCanceled || p.CancellationReason != "abandoned" {
					t.Fatalf("payment = %+v", p)
				}
			},
		},
		"a failed authentication": {
			`{"id":"pi_3f","object":"payment_intent","amount":2000,"currency":"usd","status":"requires_payment_method",
			  "last_payment_error":{"type":"invalid_request_error","code":"payment_intent_authentication_failure",
			  "message":"The provided PaymentMethod has failed authentication.",
			  "payment_method":{"id":"pm_card_threeDSecure2Required","object":"payment_method","type":"card","card":{"brand":"visa","fingerprint":"fp3DS","last4":"3220"}}}}`,
			func(t *testing.T, p provider.Payment) {
				d := p.Decline
				if p.Status != provider.StatusDeclined || d == nil || d.Code != "payment_intent_authentication_failure" ||
					d.ErrorCode != "payment_intent_authentication_failure" || d.Network != "visa" ||
					p.PaymentMethod != "pm_card_threeDSecure2Required" || p.Card == nil || p.Card.Fingerprint != "fp3DS" {
					t.Fatalf("payment = %+v, decline %+v", p, d)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var pi stripe.PaymentIntent
			if err := json.Unmarshal([]byte(tc.body), &pi); err != nil {
				t.Fatal(err)
			}
			tc.check(t, toPayment(&pi, []byte(tc.body)))
		})
	}
}

// An off-session charge that needs authentication is a 402 card_error with
// authentication_required as both code and decline_code: a decline for the classifier.
func TestOffSessionAuthenticationRequiredIsADecline(t *testing.T) {
	body := `{"error":{"type":"card_error","code":"authentication_required","decline_code":"authentication_required",
	  "message":"Your card was declined. This transaction requires authentication.",
	  "payment_intent":{"id":"pi_3g","object":"payment_intent","amount":900,"currency":"usd","status":"requires_payment_method",
	    "last_payment_error":{"type":"card_error","code":"authentication_required","decline_code":"authentication_required"}},
	  "payment_method":{"id":"pm_card_authenticationRequired","object":"payment_method","type":"card","card":{"brand":"visa","fingerprint":"fpAR","last4":"3184"}}}}`
	var env struct {
		Error *stripe.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatal(err)
	}
	c := &Client{}
	err := c.statusError("create", "twice_pay_x", 402, nil, env.Error, env.Error)
	var de *provider.DeclineError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a decline", err)
	}
	p := de.Payment
	if p.ID != "pi_3g" || p.Status != provider.StatusDeclined || p.Decline.Code != "authentication_required" ||
		p.Decline.ErrorCode != "authentication_required" || p.Card == nil || p.Card.Fingerprint != "fpAR" {
		t.Fatalf("payment = %+v, decline %+v", p, p.Decline)
	}
}

func TestToRefund(t *testing.T) {
	tests := map[string]struct {
		body string
		want provider.Refund
	}{
		"succeeded": {`{"id":"re_1","object":"refund","amount":500,"currency":"usd","status":"succeeded","payment_intent":"pi_1",
			"reason":"requested_by_customer","created":1790000000,"metadata":{"k":"v"}}`,
			provider.Refund{ID: "re_1", Payment: "pi_1", Amount: 500, Currency: "usd", Status: provider.RefundSucceeded,
				Reason: provider.RefundRequestedByCustomer, Created: time.Unix(1790000000, 0).UTC(), Metadata: map[string]string{"k": "v"}}},
		"failed later": {`{"id":"re_2","object":"refund","amount":500,"currency":"usd","status":"failed","payment_intent":"pi_1",
			"failure_reason":"expired_or_canceled_card","created":1790000000}`,
			provider.Refund{ID: "re_2", Payment: "pi_1", Amount: 500, Currency: "usd", Status: provider.RefundFailed,
				FailureReason: "expired_or_canceled_card", Created: time.Unix(1790000000, 0).UTC()}},
		"requires_action is pending": {`{"id":"re_3","object":"refund","amount":1,"currency":"eur","status":"requires_action","payment_intent":"pi_2","created":1}`,
			provider.Refund{ID: "re_3", Payment: "pi_2", Amount: 1, Currency: "eur", Status: provider.RefundPending, Created: time.Unix(1, 0).UTC()}},
		"canceled": {`{"id":"re_4","object":"refund","amount":1,"currency":"eur","status":"canceled","payment_intent":"pi_2","created":1}`,
			provider.Refund{ID: "re_4", Payment: "pi_2", Amount: 1, Currency: "eur", Status: provider.RefundCanceled, Created: time.Unix(1, 0).UTC()}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var r stripe.Refund
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			if got := toRefund(&r); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("toRefund = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestAdviceFromMalformedJSONIsEmpty(t *testing.T) {
	for name, raw := range map[string]string{"empty": "", "not json": "<html>", "wrong type": `{"error": {"advice_code": 3}}`} {
		t.Run(name, func(t *testing.T) {
			if got := adviceFromErrorBody([]byte(raw)); got != (adviceFields{}) {
				t.Fatalf("advice = %+v, want none", got)
			}
		})
	}
}

// Error and PaymentIntent bodies come from the network (Stripe, the simulator, a proxy).
func FuzzAdvice(f *testing.F) {
	f.Add([]byte(declineBody))
	f.Add([]byte(`{"last_payment_error": {"advice_code": "do_not_try_again", "network_advice_code": "03"}}`))
	f.Add([]byte(`<html>502</html>`))
	f.Add([]byte(`{"error": null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, b := adviceFromErrorBody(raw), adviceFromPaymentIntent(raw)
		if len(a.AdviceCode)+len(a.NetworkAdviceCode)+len(a.NetworkDeclineCode) > len(raw) ||
			len(b.AdviceCode)+len(b.NetworkAdviceCode)+len(b.NetworkDeclineCode) > len(raw) {
			t.Fatalf("advice longer than its input: %+v %+v", a, b)
		}
	})
}
