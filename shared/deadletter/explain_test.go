package deadletter

import (
	"strings"
	"testing"
	"time"
)

func TestExplain(t *testing.T) {
	tests := map[string]struct {
		class      Cause
		facts      Facts
		want       []string // phrases the explanation must contain
		wantAction string   // a phrase the suggested action must contain
	}{
		"limit, window ended": {CauseDeclineLimit, Facts{DeclineCode: "insufficient_funds", StopReason: "window", Window: 14 * 24 * time.Hour},
			[]string{"The card issuer declined: insufficient funds.", "Next automatic retry was not possible because the 14-day recovery window ended."}, "funds"},
		"limit, network caps": {CauseDeclineLimit, Facts{DeclineCode: "card_velocity_exceeded", StopReason: "caps"},
			[]string{"card velocity exceeded", "card network's limit on retries"}, "retry"},
		"hard":             {CauseDeclineHard, Facts{DeclineCode: "stolen_card"}, []string{"declined: stolen card", "never approve"}, "different payment method"},
		"cancellation":     {CauseDeclineCancellation, Facts{DeclineCode: "stop_payment_order"}, []string{"withdrew"}, "cancellation"},
		"data":             {CauseDeclineData, Facts{DeclineCode: "expired_card"}, []string{"expired card", "out of date"}, "update their card"},
		"auth":             {CauseDeclineAuth, Facts{DeclineCode: "authentication_required"}, []string{"confirm this payment"}, "payment link"},
		"technical":        {CauseDeclineTechnical, Facts{DeclineCode: "processing_error", StopReason: "max_attempts", Charges: 8}, []string{"processor", "after 8 attempts"}, "status page"},
		"generic no code":  {CauseDeclineGeneric, Facts{}, []string{"declined the payment", "no specific reason"}, "bank"},
		"review":           {CauseDeclineReview, Facts{DeclineCode: "duplicate_transaction"}, []string{"duplicate"}, "existing payment"},
		"config":           {CauseDeclineConfig, Facts{DeclineCode: "testmode_decline"}, []string{"integration"}, "developer"},
		"throttled":        {CauseHTTPThrottled, Facts{PaymentID: "pay_1"}, []string{"slow down", "for pay_1"}, "Wait"},
		"transient":        {CauseHTTPTransient, Facts{Invoice: "in_7"}, []string{"temporary error for in_7", "Nothing was charged"}, "status page"},
		"unknown outcome":  {CauseHTTPUnknown, Facts{PaymentID: "pay_9", Deliveries: 4}, []string{"whether payment pay_9 went through", "failed 4 times"}, "cannot be charged twice"},
		"permanent":        {CauseHTTPPermanent, Facts{}, []string{"rejected the request"}, "correct the data"},
		"credentials":      {CauseHTTPCredentials, Facts{}, []string{"refused our credentials"}, "API key"},
		"signature":        {CauseSignature, Facts{Provider: "stripe"}, []string{"webhook from stripe", "without a valid signature"}, "signing secret"},
		"validation":       {CauseValidation, Facts{}, []string{"missing required fields"}, "payload"},
		"exhausted":        {CauseExhaustedRecovery, Facts{Invoice: "in_1", DeclineCode: "insufficient_funds", StopReason: "window", Window: 14 * 24 * time.Hour}, []string{"recovery for in_1", "insufficient funds", "14-day"}, "another payment method"},
		"processing":       {CauseProcessing, Facts{EventID: "evt_1", Provider: "stripe", Deliveries: 5}, []string{"Webhook event evt_1 from stripe", "failed 5 times"}, "retry"},
		"poison":           {CausePoison, Facts{Deliveries: 1}, []string{"could not be read", "once"}, "ignore"},
		"missing locally":  {CauseReconMissingLocally, Facts{PaymentID: "pi_1"}, []string{"pi_1", "no record"}, "webhook"},
		"missing provider": {CauseReconMissingAtProvider, Facts{PaymentID: "pay_1"}, []string{"pay_1", "no record of it"}, "charged"},
		"status mismatch":  {CauseReconStatusMismatch, Facts{PaymentID: "pay_1", Local: "pending", Remote: "succeeded"}, []string{"pending here but succeeded"}, "provider's status"},
		"amount mismatch":  {CauseReconAmountMismatch, Facts{PaymentID: "pay_1", Local: "1000 usd", Remote: "1200 usd"}, []string{"1000 usd here but 1200 usd"}, "refund"},
		"duplicate charge": {CauseReconDuplicateCharge, Facts{Invoice: "in_2"}, []string{"more than once for in_2"}, "refund"},
		"unknown class":    {Cause("nope"), Facts{}, []string{"needs a person"}, "retry or resolve"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, action := Explain(tc.class, tc.facts)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("explanation %q lacks %q", got, w)
				}
			}
			if !strings.Contains(action, tc.wantAction) {
				t.Errorf("action %q lacks %q", action, tc.wantAction)
			}
		})
	}
}

func TestEveryClassHasItsOwnText(t *testing.T) {
	fallback, _ := Explain("", Facts{})
	seen := map[string]Cause{}
	for _, c := range Causes {
		got, _ := Explain(c, Facts{})
		if got == fallback {
			t.Errorf("class %s falls back to the generic text", c)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("classes %s and %s share a text", c, other)
		}
		seen[got] = c
	}
}

// Facts may carry attacker-controlled values (a decline code from a provider payload, an event
// id from a webhook body); none of it may reach an operator's screen unfiltered.
func TestExplainNeverLeaks(t *testing.T) {
	hostile := Facts{
		DeclineCode: "<script>alert(1)</script>", PaymentID: "pay_1 sk_live_123", Invoice: "in_1\nERROR db password=x",
		EventID: "evt_1\"; DROP", Provider: "stripe/../../etc", Local: "<b>x</b>", Remote: strings.Repeat("a", 100),
	}
	for _, c := range Causes {
		got, action := Explain(c, hostile)
		for _, bad := range []string{"<", "sk_live", "password", "DROP", "../", "\n", strings.Repeat("a", 50)} {
			if strings.Contains(got+action, bad) {
				t.Errorf("%s: text leaks %q: %q", c, bad, got)
			}
		}
	}
}
