package stripesim

import "crypto/sha256"

// testCard is the fixed behaviour of one of Stripe's test PaymentMethods.
type testCard struct {
	brand   string
	last4   string
	funding string
	decline *decline // nil: the charge succeeds
	// authenticate: the issuer requires 3-D Secure: on-session the confirm answers
	// requires_action; off-session it declines with authentication_required.
	authenticate bool
	// refundFail: a refund is accepted (succeeded) and fails RefundFailureDelay later.
	refundFail bool
}

// decline is the outcome of a declined charge, with Stripe's codes and messages.
type decline struct {
	Code               string `json:"code"`
	DeclineCode        string `json:"decline_code"`
	Message            string `json:"message"`
	Param              string `json:"param,omitempty"`
	AdviceCode         string `json:"advice_code,omitempty"`
	NetworkAdviceCode  string `json:"network_advice_code,omitempty"`
	NetworkDeclineCode string `json:"network_decline_code,omitempty"`
}

// Messages Stripe returns for these declines (docs.stripe.com/declines/codes, /testing).
const (
	msgDeclined = "Your card was declined."
	msgFunds    = "Your card has insufficient funds."
	msgVelocity = "Your card was declined for making repeated attempts too frequently or exceeding its amount limit."
	msgExpired  = "Your card has expired."
	msgCVC      = "Your card's security code is incorrect."
	msgProcess  = "An error occurred while processing your card. Try again in a little bit."
	msgAuthReq  = "Your card was declined. This transaction requires authentication."
	msgAuthFail = "The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again."
)

// testCards are Stripe's test PaymentMethods the simulator knows. Any other pm_ id is
// unknown (400 resource_missing) unless registered through POST /_sim/cards.
var testCards = map[string]testCard{
	"pm_card_visa":       {brand: "visa", last4: "4242", funding: "credit"},
	"pm_card_visa_debit": {brand: "visa", last4: "5556", funding: "debit"},
	"pm_card_mastercard": {brand: "mastercard", last4: "4444", funding: "credit"},
	"pm_card_amex":       {brand: "amex", last4: "8431", funding: "credit"},
	"pm_card_visa_chargeDeclined": {brand: "visa", last4: "0002", funding: "credit",
		decline: &decline{Code: "card_declined", DeclineCode: "generic_decline", Message: msgDeclined, NetworkDeclineCode: "05"}},
	"pm_card_visa_chargeDeclinedInsufficientFunds": {brand: "visa", last4: "9995", funding: "credit",
		decline: &decline{Code: "card_declined", DeclineCode: "insufficient_funds", Message: msgFunds, NetworkDeclineCode: "51"}},
	"pm_card_visa_chargeDeclinedLostCard": {brand: "visa", last4: "9987", funding: "credit",
		decline: &decline{Code: "card_declined", DeclineCode: "lost_card", Message: msgDeclined, NetworkDeclineCode: "41"}},
	"pm_card_visa_chargeDeclinedStolenCard": {brand: "visa", last4: "9979", funding: "credit",
		decline: &decline{Code: "card_declined", DeclineCode: "stolen_card", Message: msgDeclined, NetworkDeclineCode: "43"}},
	"pm_card_visa_chargeDeclinedVelocityLimitExceeded": {brand: "visa", last4: "6975", funding: "credit",
		decline: &decline{Code: "card_declined", DeclineCode: "card_velocity_exceeded", Message: msgVelocity, NetworkDeclineCode: "61"}},
	"pm_card_chargeDeclinedExpiredCard": {brand: "visa", last4: "0069", funding: "credit",
		decline: &decline{Code: "expired_card", DeclineCode: "expired_card", Message: msgExpired, Param: "exp_month", NetworkDeclineCode: "54"}},
	"pm_card_chargeDeclinedIncorrectCvc": {brand: "visa", last4: "0127", funding: "credit",
		decline: &decline{Code: "incorrect_cvc", DeclineCode: "incorrect_cvc", Message: msgCVC, Param: "cvc", NetworkDeclineCode: "N7"}},
	"pm_card_chargeDeclinedProcessingError": {brand: "visa", last4: "0119", funding: "credit",
		decline: &decline{Code: "processing_error", DeclineCode: "processing_error", Message: msgProcess, NetworkDeclineCode: "96"}},
	// The payment flows (docs.stripe.com/testing): 3-D Secure required (4000 0000 0000 3220),
	// authentication always required (4000 0027 6000 3184), and a refund that fails later
	// (4000 0000 0000 5126). Both authentication cards behave alike here, as no SetupIntent
	// exists to tell them apart.
	"pm_card_threeDSecure2Required":  {brand: "visa", last4: "3220", funding: "credit", authenticate: true},
	"pm_card_authenticationRequired": {brand: "visa", last4: "3184", funding: "credit", authenticate: true},
	"pm_card_refundFail":             {brand: "visa", last4: "5126", funding: "credit", refundFail: true},
}

// authRequired is the decline of an off-session charge on a card that requires
// authentication: Stripe's code and decline_code are both authentication_required.
var authRequired = &decline{Code: "authentication_required", DeclineCode: "authentication_required", Message: msgAuthReq}

// cardRule is a programmed behaviour for a PaymentMethod, set through POST /_sim/cards:
// the next Times confirms decline with Decline, then the card behaves as its base
// (a known test card, or success with Brand for a new pm_ id). Processing, when set,
// leaves confirmed PaymentIntents in "processing" until POST /_sim/payment_intents/{id}/settle.
type cardRule struct {
	PaymentMethod string   `json:"payment_method"`
	Brand         string   `json:"brand"`
	Times         int      `json:"times"`
	Decline       *decline `json:"decline,omitempty"`
	Processing    bool     `json:"processing,omitempty"`
	// Fingerprint, when set, is the card number this PaymentMethod stands for: two
	// PaymentMethods with one fingerprint are one card (a card added again by the customer).
	Fingerprint string `json:"fingerprint,omitempty"`
}

// cardFingerprint is a PaymentMethod's card fingerprint: the registered one, or one derived
// from the pm id, so that every test card has its own, stable across restarts (16
// alphanumerics, Stripe's shape).
func cardFingerprint(pm, registered string) string {
	if registered != "" {
		return registered
	}
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	sum := sha256.Sum256([]byte("card-fingerprint:" + pm))
	out := make([]byte, 16)
	for i := range out {
		out[i] = alnum[int(sum[i])%len(alnum)]
	}
	return string(out)
}

func declineMessage(code string) string {
	switch code {
	case "insufficient_funds":
		return msgFunds
	case "card_velocity_exceeded", "withdrawal_count_limit_exceeded":
		return msgVelocity
	case "expired_card":
		return msgExpired
	case "incorrect_cvc":
		return msgCVC
	case "processing_error":
		return msgProcess
	}
	return msgDeclined
}

// errorCodeFor gives Stripe's error code for a decline code: a few declines carry
// their own code, every other one is card_declined.
func errorCodeFor(declineCode string) string {
	switch declineCode {
	case "expired_card", "incorrect_cvc", "processing_error", "incorrect_number":
		return declineCode
	}
	return "card_declined"
}

func lastFour(brand string) string {
	switch brand {
	case "mastercard":
		return "4444"
	case "amex":
		return "8431"
	}
	return "4242"
}
