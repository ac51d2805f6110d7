package stripeprovider

import (
	"testing"

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
		"requires_capture":              {stripe.PaymentIntent{Status: "requires_capture"}, provider.StatusProcessing},
		"requires_payment_method fresh": {stripe.PaymentIntent{Status: "requires_payment_method"}, provider.StatusPending},
		"requires_payment_method after a decline": {
			stripe.PaymentIntent{Status: "requires_payment_method", LastPaymentError: declined}, provider.StatusDeclined},
		"requires_confirmation": {stripe.PaymentIntent{Status: "requires_confirmation"}, provider.StatusPending},
		"requires_action":       {stripe.PaymentIntent{Status: "requires_action"}, provider.StatusPending},
		"canceled":              {stripe.PaymentIntent{Status: "canceled"}, provider.StatusCanceled},
		"a future status":       {stripe.PaymentIntent{Status: "requires_something_new"}, provider.StatusPending},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := toStatus(&tc.pi); got != tc.want {
				t.Fatalf("toStatus(%s) = %s, want %s", tc.pi.Status, got, tc.want)
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
