package declines

// The tables below transcribe shared/reference/declines.md. Each row's reason is a short
// plain-language phrase that completes "The card issuer declined: ...".

// adviceTable is Stripe's outcome.advice_code.
var adviceTable = map[string]rule{
	"do_not_try_again":  {class: ClassHard, action: ActionNewPaymentMethod, reason: "do not try this card again"},
	"confirm_card_data": {class: ClassData, action: ActionUpdateCard, reason: "the customer should confirm the card details"},
	"try_again_later":   {class: ClassGeneric, action: ActionRetrySpaced, reason: "try again later"},
}

const (
	hour = int64(3600)
	day  = 24 * hour
)

// macTable is the Mastercard Merchant Advice Code table.
var macTable = map[string]rule{
	"01": {class: ClassData, action: ActionAccountUpdater, reason: "new account information is available; update the card details, then retry"},
	"02": {class: ClassGeneric, action: ActionRetryAfter, reason: "the issuer cannot approve now; try again in 72 hours", delay: 72 * hour},
	"03": {class: ClassHard, action: ActionNewPaymentMethod, reason: "do not try this card again"},
	"04": {class: ClassConfig, action: ActionFixIntegration, reason: "the token requirements were not met"},
	"21": {class: ClassCancellation, action: ActionTreatAsCancelled, reason: "the cardholder stopped recurring payments"},
	"24": {action: ActionRetryAfter, reason: "retry after 1 hour", delay: 1 * hour},
	"25": {action: ActionRetryAfter, reason: "retry after 24 hours", delay: 24 * hour},
	"26": {action: ActionRetryAfter, reason: "retry after 2 days", delay: 2 * day},
	"27": {action: ActionRetryAfter, reason: "retry after 4 days", delay: 4 * day},
	"28": {action: ActionRetryAfter, reason: "retry after 6 days", delay: 6 * day},
	"29": {action: ActionRetryAfter, reason: "retry after 8 days", delay: 8 * day},
	"30": {action: ActionRetryAfter, reason: "retry after 10 days", delay: 10 * day},
}

// tableA is Stripe's decline_code table.
var tableA = map[string]rule{
	"lost_card":   {ClassHard, ActionNewPaymentMethod, "the card was reported lost", 0},
	"stolen_card": {ClassHard, ActionNewPaymentMethod, "the card was reported stolen", 0},
	"pickup_card": {ClassHard, ActionStop, "the issuer asked for the card to be retained", 0},

	"restricted_card": {ClassHard, ActionAskCustomer, "the card is restricted", 0},

	"fraudulent":         {ClassHard, ActionReview, "the issuer suspects fraud", 0},
	"merchant_blacklist": {ClassHard, ActionReview, "the payment matched a block list", 0},

	"incorrect_number": {ClassData, ActionUpdateCard, "the card number is incorrect", 0},
	"invalid_number":   {ClassData, ActionUpdateCard, "the card number is invalid", 0},

	"revocation_of_authorization":      {ClassCancellation, ActionTreatAsCancelled, "the customer revoked the authorization for these payments", 0},
	"revocation_of_all_authorizations": {ClassCancellation, ActionTreatAsCancelled, "the customer revoked all recurring authorizations", 0},
	"stop_payment_order":               {ClassCancellation, ActionTreatAsCancelled, "the customer asked the issuer to stop this payment", 0},

	"invalid_account":                   {ClassData, ActionAccountUpdater, "the card account is invalid", 0},
	"new_account_information_available": {ClassData, ActionAccountUpdater, "new card details are available", 0},

	"card_not_supported":      {ClassHard, ActionNewPaymentMethod, "the card does not support this kind of payment", 0},
	"currency_not_supported":  {ClassHard, ActionNewPaymentMethod, "the card does not support this currency", 0},
	"transaction_not_allowed": {ClassHard, ActionNewPaymentMethod, "the card does not allow this transaction", 0},
	"do_not_try_again":        {ClassHard, ActionNewPaymentMethod, "the issuer said not to try again", 0},

	"expired_card": {ClassData, ActionAccountUpdater, "the card has expired", 0},

	"incorrect_cvc":                  {ClassData, ActionUpdateCard, "the security code is incorrect", 0},
	"invalid_cvc":                    {ClassData, ActionUpdateCard, "the security code is invalid", 0},
	"incorrect_zip":                  {ClassData, ActionUpdateCard, "the postal code is incorrect", 0},
	"incorrect_address":              {ClassData, ActionUpdateCard, "the billing address is incorrect", 0},
	"invalid_expiry_month":           {ClassData, ActionUpdateCard, "the expiry month is invalid", 0},
	"invalid_expiry_year":            {ClassData, ActionUpdateCard, "the expiry year is invalid", 0},
	"incorrect_pin":                  {ClassData, ActionUpdateCard, "the PIN is incorrect", 0},
	"invalid_pin":                    {ClassData, ActionUpdateCard, "the PIN is invalid", 0},
	"pin_try_exceeded":               {ClassData, ActionUpdateCard, "too many PIN attempts were made", 0},
	"offline_pin_required":           {ClassData, ActionUpdateCard, "the card requires a PIN", 0},
	"online_or_offline_pin_required": {ClassData, ActionUpdateCard, "the card requires a PIN", 0},

	"authentication_required":               {ClassAuth, ActionAuthenticate, "the customer must authenticate this payment", 0},
	"authentication_not_handled":            {ClassAuth, ActionAuthenticate, "the customer's authentication was not completed", 0},
	"mobile_device_authentication_required": {ClassAuth, ActionAuthenticate, "the customer must authenticate on their device", 0},
	// Stripe's error code (no decline_code) when the customer failed or abandoned the 3-D
	// Secure challenge: the same remedy, an on-session payment the customer authenticates.
	"payment_intent_authentication_failure": {ClassAuth, ActionAuthenticate, "the customer did not complete authentication", 0},

	"insufficient_funds":              {ClassLimit, ActionRetryWhenFunded, "insufficient funds", 0},
	"card_velocity_exceeded":          {ClassLimit, ActionRetryNextDay, "the card's spending limit was reached", 0},
	"withdrawal_count_limit_exceeded": {ClassLimit, ActionRetryNextDay, "the card's limit on the number of payments was reached", 0},
	"invalid_amount":                  {ClassLimit, ActionRetryNextCycle, "the amount exceeds what the card allows", 0},

	"issuer_not_available": {ClassTechnical, ActionRetryBackoff, "the issuer could not be reached", 0},
	"processing_error":     {ClassTechnical, ActionRetryBackoff, "a processing error occurred", 0},
	"reenter_transaction":  {ClassTechnical, ActionRetryBackoff, "the issuer asked for the payment to be tried again", 0},
	"approve_with_id":      {ClassTechnical, ActionRetryBackoff, "the issuer could not approve the payment right now", 0},
	"try_again_later":      {ClassTechnical, ActionRetryBackoff, "the issuer asked to try again later", 0},

	"do_not_honor":        {ClassGeneric, ActionRetrySpaced, "no reason was given (do not honor)", 0},
	"generic_decline":     {ClassGeneric, ActionRetrySpaced, "no reason was given", 0},
	"call_issuer":         {ClassGeneric, ActionRetrySpaced, "the customer should call their card issuer", 0},
	"no_action_taken":     {ClassGeneric, ActionRetrySpaced, "the issuer took no action", 0},
	"not_permitted":       {ClassGeneric, ActionRetrySpaced, "the payment is not permitted", 0},
	"service_not_allowed": {ClassGeneric, ActionRetrySpaced, "the card does not allow this service", 0},
	"security_violation":  {ClassGeneric, ActionRetrySpaced, "the issuer reported a security violation", 0},

	"duplicate_transaction": {ClassReview, ActionReview, "it looks like a duplicate of a recent payment", 0},
	"testmode_decline":      {ClassConfig, ActionFixIntegration, "a test card was used in live mode", 0},
}

// networkRule is a row of table B: a Visa decline category and what it means for us.
type networkRule struct {
	rule
	category int
}

func cat(category int, class Class, action Action, reason string) networkRule {
	return networkRule{rule: rule{class: class, action: action, reason: reason}, category: category}
}

// tableB is the raw network response code table with Visa's decline categories. Codes not
// listed are category 4 (generic). Within category 2 the codes whose meaning fixes the timing
// (funds, withdrawal limits, issuer faults) get that timing; the rest retry days apart.
var tableB = map[string]networkRule{
	// Category 1: the issuer will never approve; Visa charges a fee per reattempt.
	"04": cat(1, ClassHard, ActionNewPaymentMethod, "pick up the card"),
	"07": cat(1, ClassHard, ActionNewPaymentMethod, "pick up the card (special condition)"),
	"12": cat(1, ClassHard, ActionNewPaymentMethod, "invalid transaction"),
	"14": cat(1, ClassHard, ActionNewPaymentMethod, "invalid card number"),
	"15": cat(1, ClassHard, ActionNewPaymentMethod, "no such issuer"),
	"41": cat(1, ClassHard, ActionNewPaymentMethod, "the card was reported lost"),
	"43": cat(1, ClassHard, ActionNewPaymentMethod, "the card was reported stolen"),
	"46": cat(1, ClassHard, ActionNewPaymentMethod, "the account is closed"),
	"57": cat(1, ClassHard, ActionNewPaymentMethod, "the transaction is not permitted to the cardholder"),
	"R0": cat(1, ClassCancellation, ActionTreatAsCancelled, "the customer ordered the payment stopped"),
	"R1": cat(1, ClassCancellation, ActionTreatAsCancelled, "the customer revoked the authorization"),
	"R3": cat(1, ClassCancellation, ActionTreatAsCancelled, "the customer revoked all authorizations"),

	// Category 2: the issuer cannot approve now.
	"03": cat(2, ClassGeneric, ActionRetrySpaced, "invalid merchant"),
	"19": cat(2, ClassTechnical, ActionRetryBackoff, "re-enter the transaction"),
	"39": cat(2, ClassGeneric, ActionRetrySpaced, "no credit account"),
	"51": cat(2, ClassLimit, ActionRetryWhenFunded, "insufficient funds"),
	"52": cat(2, ClassGeneric, ActionRetrySpaced, "no checking account"),
	"53": cat(2, ClassGeneric, ActionRetrySpaced, "no savings account"),
	"59": cat(2, ClassGeneric, ActionRetrySpaced, "suspected fraud"),
	"61": cat(2, ClassLimit, ActionRetryNextDay, "the withdrawal amount limit was exceeded"),
	"62": cat(2, ClassGeneric, ActionRetrySpaced, "the card is restricted"),
	"65": cat(2, ClassLimit, ActionRetryNextDay, "the withdrawal count limit was exceeded"),
	"75": cat(2, ClassGeneric, ActionRetrySpaced, "too many PIN attempts were made"),
	"78": cat(2, ClassGeneric, ActionRetrySpaced, "the card is blocked until first use"),
	"86": cat(2, ClassGeneric, ActionRetrySpaced, "the PIN cannot be verified"),
	"91": cat(2, ClassTechnical, ActionRetryBackoff, "the issuer is unavailable"),
	"93": cat(2, ClassGeneric, ActionRetrySpaced, "the transaction cannot be completed (violation of law)"),
	"96": cat(2, ClassTechnical, ActionRetryBackoff, "a system malfunction occurred"),
	"5C": cat(2, ClassGeneric, ActionRetrySpaced, "the transaction is not supported by the issuer"),
	"9G": cat(2, ClassGeneric, ActionRetrySpaced, "the cardholder blocked the payment"),
	"N3": cat(2, ClassGeneric, ActionRetrySpaced, "the cash back service is not available"),
	"N4": cat(2, ClassLimit, ActionRetryNextDay, "the amount exceeds the issuer's limit"),
	"Z5": cat(2, ClassGeneric, ActionRetrySpaced, "the amount is not supported for this account"),

	// Category 3: data quality; revalidate the details before any reattempt.
	"54": cat(3, ClassData, ActionAccountUpdater, "the card has expired"),
	"55": cat(3, ClassData, ActionUpdateCard, "the PIN is incorrect"),
	"82": cat(3, ClassData, ActionUpdateCard, "the card verification value failed"),
	"6P": cat(3, ClassData, ActionUpdateCard, "the verification data failed"),
	"N7": cat(3, ClassData, ActionUpdateCard, "the security code (CVV2) failed"),

	// Category 4: generic; the named ones get a readable reason.
	"01": cat(4, ClassGeneric, ActionRetrySpaced, "refer to the card issuer"),
	"05": cat(4, ClassGeneric, ActionRetrySpaced, "do not honor"),
	"13": cat(4, ClassGeneric, ActionRetrySpaced, "invalid amount"),
	"58": cat(4, ClassGeneric, ActionRetrySpaced, "the transaction is not permitted to the terminal"),
	"63": cat(4, ClassGeneric, ActionRetrySpaced, "security violation"),
}

// VisaCategory returns the Visa decline category (1-4) of a raw network response code, with
// every code outside categories 1-3 in category 4, as Visa defines it.
func VisaCategory(code string) int {
	n := normalise(Decline{NetworkDeclineCode: code})
	if r, ok := tableB[n.network]; ok {
		return r.category
	}
	return 4
}
