package declines

import (
	"strings"
	"testing"
)

// want is the expected verdict for a group of codes, transcribed from declines.md by hand
// rather than read back from the tables under test.
type want struct {
	class         Class
	action        Action
	retryable     bool
	needsCustomer bool
	needsReview   bool
}

var (
	stopHard     = want{class: ClassHard, action: ActionStop}
	newCard      = want{class: ClassHard, action: ActionNewPaymentMethod, needsCustomer: true}
	askCustomer  = want{class: ClassHard, action: ActionAskCustomer, needsCustomer: true}
	hardReview   = want{class: ClassHard, action: ActionReview, needsReview: true}
	fixData      = want{class: ClassData, action: ActionUpdateCard, needsCustomer: true}
	updater      = want{class: ClassData, action: ActionAccountUpdater, needsCustomer: true}
	cancelled    = want{class: ClassCancellation, action: ActionTreatAsCancelled}
	authenticate = want{class: ClassAuth, action: ActionAuthenticate, needsCustomer: true}
	funded       = want{class: ClassLimit, action: ActionRetryWhenFunded, retryable: true}
	nextDay      = want{class: ClassLimit, action: ActionRetryNextDay, retryable: true}
	nextCycle    = want{class: ClassLimit, action: ActionRetryNextCycle, retryable: true}
	backoff      = want{class: ClassTechnical, action: ActionRetryBackoff, retryable: true}
	spaced       = want{class: ClassGeneric, action: ActionRetrySpaced, retryable: true}
	review       = want{class: ClassReview, action: ActionReview, needsReview: true}
	config       = want{class: ClassConfig, action: ActionFixIntegration, needsReview: true}
)

func check(t *testing.T, got Classification, w want, src Source) {
	t.Helper()
	if got.Class != w.class || got.Action != w.action || got.Retryable != w.retryable ||
		got.NeedsCustomer != w.needsCustomer || got.NeedsReview != w.needsReview || got.Source != src {
		t.Errorf("got class=%s action=%s retryable=%v customer=%v review=%v source=%s; want %+v source=%s",
			got.Class, got.Action, got.Retryable, got.NeedsCustomer, got.NeedsReview, got.Source, w, src)
	}
	if got.Explanation == "" || !strings.HasSuffix(got.Explanation, ".") || strings.Count(got.Explanation, ". ") > 0 {
		t.Errorf("explanation %q is not one sentence", got.Explanation)
	}
}

func TestTableA(t *testing.T) {
	groups := []struct {
		codes []string
		want  want
	}{
		{[]string{"lost_card", "stolen_card"}, newCard},
		{[]string{"pickup_card"}, stopHard},
		{[]string{"restricted_card"}, askCustomer},
		{[]string{"fraudulent", "merchant_blacklist"}, hardReview},
		{[]string{"incorrect_number", "invalid_number"}, fixData},
		{[]string{"revocation_of_authorization", "revocation_of_all_authorizations", "stop_payment_order"}, cancelled},
		{[]string{"invalid_account", "new_account_information_available"}, updater},
		{[]string{"card_not_supported", "currency_not_supported", "transaction_not_allowed", "do_not_try_again"}, newCard},
		{[]string{"expired_card"}, updater},
		{[]string{"incorrect_cvc", "invalid_cvc", "incorrect_zip", "incorrect_address", "invalid_expiry_month",
			"invalid_expiry_year", "incorrect_pin", "invalid_pin", "pin_try_exceeded", "offline_pin_required",
			"online_or_offline_pin_required"}, fixData},
		{[]string{"authentication_required", "authentication_not_handled", "mobile_device_authentication_required",
			"payment_intent_authentication_failure"}, authenticate},
		{[]string{"insufficient_funds"}, funded},
		{[]string{"card_velocity_exceeded", "withdrawal_count_limit_exceeded"}, nextDay},
		{[]string{"invalid_amount"}, nextCycle},
		{[]string{"issuer_not_available", "processing_error", "reenter_transaction", "approve_with_id", "try_again_later"}, backoff},
		{[]string{"do_not_honor", "generic_decline", "call_issuer", "no_action_taken", "not_permitted",
			"service_not_allowed", "security_violation"}, spaced},
		{[]string{"duplicate_transaction"}, review},
		{[]string{"testmode_decline"}, config},
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, code := range g.codes {
			seen[code] = true
			t.Run(code, func(t *testing.T) {
				got := Classify(Decline{Code: code, Network: NetworkVisa})
				check(t, got, g.want, SourceDeclineCode)
				if got.Code != code {
					t.Errorf("code = %q, want %q", got.Code, code)
				}
				if !strings.HasPrefix(got.Explanation, "The card issuer declined: ") {
					t.Errorf("explanation %q", got.Explanation)
				}
			})
		}
	}
	for code := range tableA {
		if !seen[code] {
			t.Errorf("table A code %q has no test case", code)
		}
	}
	if len(seen) != len(tableA) {
		t.Errorf("tested %d codes, table A has %d", len(seen), len(tableA))
	}
}

func TestStripeSmartRetriesNeverRetry(t *testing.T) {
	// Stripe's own Smart Retries never retry these; neither do we.
	for _, code := range []string{"incorrect_number", "lost_card", "pickup_card", "stolen_card",
		"revocation_of_authorization", "revocation_of_all_authorizations", "authentication_required",
		"payment_intent_authentication_failure"} {
		t.Run(code, func(t *testing.T) {
			if c := Classify(Decline{Code: code}); c.Retryable {
				t.Errorf("%s is retryable", code)
			}
		})
	}
}

func TestTableB(t *testing.T) {
	groups := []struct {
		category int
		codes    []string
		want     want
	}{
		{1, []string{"04", "07", "12", "14", "15", "41", "43", "46", "57"}, newCard},
		{1, []string{"R0", "R1", "R3"}, cancelled},
		{2, []string{"03", "39", "52", "53", "59", "62", "75", "78", "86", "93", "5C", "9G", "N3", "Z5"}, spaced},
		{2, []string{"51"}, funded},
		{2, []string{"61", "65", "N4"}, nextDay},
		{2, []string{"19", "91", "96"}, backoff},
		{3, []string{"55", "82", "6P", "N7"}, fixData},
		{3, []string{"54"}, updater},
		{4, []string{"01", "05", "13", "58", "63"}, spaced},
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, code := range g.codes {
			seen[code] = true
			t.Run(code, func(t *testing.T) {
				got := Classify(Decline{NetworkDeclineCode: code, Network: NetworkVisa})
				check(t, got, g.want, SourceNetworkCode)
				if VisaCategory(code) != g.category {
					t.Errorf("VisaCategory(%s) = %d, want %d", code, VisaCategory(code), g.category)
				}
				if g.category == 1 && got.Retryable {
					t.Errorf("Visa category 1 code %s is retryable", code)
				}
				if !strings.Contains(got.Explanation, "response code "+code+": ") {
					t.Errorf("explanation %q does not name the code", got.Explanation)
				}
			})
		}
	}
	for code := range tableB {
		if !seen[code] {
			t.Errorf("table B code %q has no test case", code)
		}
	}
}

func TestMAC(t *testing.T) {
	delays := map[string]int64{"24": 3600, "25": 86400, "26": 2 * 86400, "27": 4 * 86400, "28": 6 * 86400, "29": 8 * 86400, "30": 10 * 86400}
	for mac, delay := range delays {
		t.Run(mac, func(t *testing.T) {
			got := Classify(Decline{Code: "insufficient_funds", NetworkAdviceCode: mac, Network: NetworkMastercard})
			check(t, got, want{class: ClassLimit, action: ActionRetryAfter, retryable: true}, SourceMAC)
			if got.DelaySeconds != delay {
				t.Errorf("delay = %d, want %d", got.DelaySeconds, delay)
			}
			if !got.NotifyCustomer {
				t.Error("insufficient funds under a MAC lost its customer notice")
			}
			// A MAC delay over a hard code: the network advice decides, the class becomes generic.
			hard := Classify(Decline{Code: "lost_card", NetworkAdviceCode: mac, Network: NetworkMastercard})
			check(t, hard, want{class: ClassGeneric, action: ActionRetryAfter, retryable: true}, SourceMAC)
		})
	}
	others := []struct {
		mac   string
		want  want
		delay int64
	}{
		{"01", updater, 0},
		{"02", want{class: ClassGeneric, action: ActionRetryAfter, retryable: true}, 72 * 3600},
		{"03", newCard, 0},
		{"04", config, 0},
		{"21", cancelled, 0},
	}
	for _, tc := range others {
		t.Run(tc.mac, func(t *testing.T) {
			got := Classify(Decline{Code: "generic_decline", NetworkAdviceCode: tc.mac, Network: NetworkMastercard})
			check(t, got, tc.want, SourceMAC)
			if got.DelaySeconds != tc.delay {
				t.Errorf("delay = %d, want %d", got.DelaySeconds, tc.delay)
			}
		})
	}
	if len(delays)+len(others) != len(macTable) {
		t.Errorf("tested %d MACs, the table has %d", len(delays)+len(others), len(macTable))
	}
}

// classifyCase is a decline and what Classify must make of it, from which source.
type classifyCase struct {
	d    Decline
	want want
	src  Source
}

func classifyCases(t *testing.T, tests map[string]classifyCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			check(t, Classify(tc.d), tc.want, tc.src)
		})
	}
}

func TestAdviceCodes(t *testing.T) {
	classifyCases(t, map[string]classifyCase{
		"do_not_try_again beats a retryable code": {
			Decline{AdviceCode: "do_not_try_again", Code: "insufficient_funds"}, newCard, SourceAdviceCode},
		"do_not_try_again beats a MAC delay": {
			Decline{AdviceCode: "do_not_try_again", NetworkAdviceCode: "24", Network: NetworkMastercard}, newCard, SourceAdviceCode},
		"confirm_card_data": {
			Decline{AdviceCode: "confirm_card_data", Code: "generic_decline"}, fixData, SourceAdviceCode},
		"try_again_later keeps funded timing": {
			Decline{AdviceCode: "try_again_later", Code: "insufficient_funds"}, funded, SourceDeclineCode},
		"try_again_later keeps a MAC delay": {
			Decline{AdviceCode: "try_again_later", NetworkAdviceCode: "25", Network: NetworkMastercard, Code: "processing_error"},
			want{class: ClassTechnical, action: ActionRetryAfter, retryable: true}, SourceMAC},
		"try_again_later over a hard code retries spaced": {
			Decline{AdviceCode: "try_again_later", Code: "lost_card"}, spaced, SourceAdviceCode},
		"try_again_later alone": {
			Decline{AdviceCode: "try_again_later"}, spaced, SourceUnknown},
	})
}

func TestPrecedenceAndUnknown(t *testing.T) {
	classifyCases(t, map[string]classifyCase{
		"decline code beats network code": {
			Decline{Code: "insufficient_funds", NetworkDeclineCode: "05"}, funded, SourceDeclineCode},
		"specific network code beats generic decline code": {
			Decline{Code: "generic_decline", NetworkDeclineCode: "41", Network: NetworkVisa}, newCard, SourceNetworkCode},
		"generic decline code beats category 4 network code": {
			Decline{Code: "do_not_honor", NetworkDeclineCode: "05"}, spaced, SourceDeclineCode},
		"MAC ignored on a Visa card": {
			Decline{Code: "processing_error", NetworkAdviceCode: "03", Network: NetworkVisa}, backoff, SourceDeclineCode},
		"MAC read when the network is unknown": {
			Decline{Code: "processing_error", NetworkAdviceCode: "03"}, newCard, SourceMAC},
		"unknown MAC falls through": {
			Decline{Code: "lost_card", NetworkAdviceCode: "99", Network: NetworkMastercard}, newCard, SourceDeclineCode},
		"unknown decline code is generic": {
			Decline{Code: "brand_new_code"}, spaced, SourceUnknown},
		"unknown network code is generic": {
			Decline{NetworkDeclineCode: "Q9"}, spaced, SourceUnknown},
		"nothing at all is generic": {
			Decline{}, spaced, SourceUnknown},
		"codes are normalised": {
			Decline{Code: "  Insufficient_Funds "}, funded, SourceDeclineCode},
		"one-digit network code": {
			Decline{NetworkDeclineCode: "4"}, newCard, SourceNetworkCode},
		"one-digit MAC": {
			Decline{NetworkAdviceCode: "3", Network: "MasterCard"}, newCard, SourceMAC},
	})
}

func TestUnknownCodeIsSanitised(t *testing.T) {
	c := Classify(Decline{Code: "<script>alert(1)</script>" + strings.Repeat("x", 100)})
	if strings.ContainsAny(c.Explanation, "<>()") || strings.ContainsAny(c.Code, "<>()") || len(c.Code) > 40 {
		t.Errorf("unsafe code leaked: code=%q explanation=%q", c.Code, c.Explanation)
	}
	if c.Class != ClassGeneric {
		t.Errorf("class = %s", c.Class)
	}
}

func TestExplanation(t *testing.T) {
	tests := map[string]struct {
		d    Decline
		want string
	}{
		"decline code": {Decline{Code: "insufficient_funds"}, "The card issuer declined: insufficient funds."},
		"network code": {Decline{NetworkDeclineCode: "51"}, "The card issuer declined with response code 51: insufficient funds."},
		"MAC":          {Decline{NetworkAdviceCode: "25", Network: NetworkMastercard}, "Mastercard advised: retry after 24 hours."},
		"advice":       {Decline{AdviceCode: "do_not_try_again"}, "The payment provider advised: do not try this card again."},
		"unknown":      {Decline{Code: "brand_new_code"}, "The card issuer declined with the unrecognised code brand_new_code; it is treated as a generic decline."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Classify(tc.d).Explanation; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
