package declines

import (
	"strings"
)

// Class is the stable, short name of a decline class. The payments API exposes it as
// "decline_class" and the recovery state machine branches on it, so the strings never change.
type Class string

// The decline classes. Hard, cancellation, data, auth, review and config never retry
// automatically; limit, technical and generic do, each with its own timing.
const (
	ClassHard         Class = "hard"         // the issuer will never approve this card for this payment
	ClassCancellation Class = "cancellation" // the customer revoked the authorization: treat as a cancellation
	ClassData         Class = "data"         // card details are wrong or stale: retry only after an update
	ClassAuth         Class = "auth"         // the customer must authenticate on-session
	ClassLimit        Class = "limit"        // funds or a spending limit: retry when it has likely reset
	ClassTechnical    Class = "technical"    // an issuer or processor fault: retry within minutes
	ClassGeneric      Class = "generic"      // no usable reason: a few retries days apart
	ClassReview       Class = "review"       // an operator must look (duplicate payment)
	ClassConfig       Class = "config"       // an integration error: fix the integration, not the card
)

// MayRetry reports whether a decline of this class may ever be retried automatically.
func (c Class) MayRetry() bool {
	return c == ClassLimit || c == ClassTechnical || c == ClassGeneric
}

// Action says what should happen next, and so how a retry is timed.
type Action string

// The actions.
const (
	ActionStop             Action = "stop"                  // never retry, nothing to ask
	ActionNewPaymentMethod Action = "new_payment_method"    // ask the customer for another card
	ActionAskCustomer      Action = "ask_customer"          // ask the customer to resolve it with their issuer
	ActionUpdateCard       Action = "update_payment_method" // the customer corrects card details
	ActionAccountUpdater   Action = "account_updater"       // refresh details from the network's updater, then ask
	ActionAuthenticate     Action = "authenticate"          // send an on-session payment link
	ActionTreatAsCancelled Action = "treat_as_cancelled"    // the customer cancelled: end the subscription
	ActionReview           Action = "review"                // flag for an operator
	ActionFixIntegration   Action = "fix_integration"       // a developer must fix the integration
	ActionRetryWhenFunded  Action = "retry_when_funded"     // retry at the next payday or billing-cycle boundary
	ActionRetryNextDay     Action = "retry_next_day"        // a daily limit: retry the next day
	ActionRetryNextCycle   Action = "retry_next_cycle"      // a cycle limit: retry at the next billing-cycle boundary
	ActionRetryBackoff     Action = "retry_backoff"         // minutes apart, exponential backoff with full jitter
	ActionRetrySpaced      Action = "retry_spaced"          // days apart, then ask the customer
	ActionRetryAfter       Action = "retry_after"           // exactly the delay the network advised
)

// Retries reports whether the action schedules an automatic retry.
func (a Action) Retries() bool {
	switch a {
	case ActionRetryWhenFunded, ActionRetryNextDay, ActionRetryNextCycle,
		ActionRetryBackoff, ActionRetrySpaced, ActionRetryAfter:
		return true
	}
	return false
}

// Source names the input that decided a classification.
type Source string

// The sources, in order of precedence.
const (
	SourceAdviceCode  Source = "advice_code"  // Stripe outcome.advice_code
	SourceMAC         Source = "mac"          // Mastercard Merchant Advice Code
	SourceDeclineCode Source = "decline_code" // Stripe decline_code (table A)
	SourceNetworkCode Source = "network_code" // raw network response code (table B)
	SourceUnknown     Source = "unknown"      // nothing recognised: treated as generic
)

// Network is a card network (Stripe's card brand names).
type Network string

// The networks the rules distinguish; any other brand is carried through as given.
const (
	NetworkVisa       Network = "visa"
	NetworkMastercard Network = "mastercard"
	NetworkAmex       Network = "amex"
	NetworkDiscover   Network = "discover"
	NetworkUnknown    Network = ""
)

// Decline is what the provider reported about a declined payment. Every field is optional.
type Decline struct {
	// Code is Stripe's decline_code (table A), e.g. "insufficient_funds".
	Code string `json:"code,omitempty"`
	// AdviceCode is Stripe's outcome.advice_code: do_not_try_again, confirm_card_data or
	// try_again_later.
	AdviceCode string `json:"advice_code,omitempty"`
	// NetworkAdviceCode is the network's advice; for Mastercard the Merchant Advice Code ("24").
	NetworkAdviceCode string `json:"network_advice_code,omitempty"`
	// NetworkDeclineCode is the raw network response code ("51").
	NetworkDeclineCode string `json:"network_decline_code,omitempty"`
	// Network is the card brand: visa, mastercard, amex, ...
	Network Network `json:"network,omitempty"`
}

// Classification is the verdict on one decline. It is JSON so that it can travel through the
// recovery state machine.
type Classification struct {
	Class Class  `json:"decline_class"`
	Code  string `json:"code,omitempty"` // the code that decided, normalised ("insufficient_funds", "51", "25")
	// Retryable reports whether an automatic retry is allowed (always Action.Retries()).
	Retryable bool `json:"retryable"`
	// NeedsCustomer reports that the customer must act (new card, corrected details,
	// authentication) before this payment can succeed.
	NeedsCustomer bool `json:"needs_customer"`
	// NeedsReview reports that an operator or developer must look.
	NeedsReview bool `json:"needs_review"`
	// NotifyCustomer suggests telling the customer even while retrying (insufficient funds).
	NotifyCustomer bool   `json:"notify_customer,omitempty"`
	Action         Action `json:"action"`
	// DelaySeconds is the exact delay advised by the network (MAC 02, 24-30); zero otherwise.
	DelaySeconds int64   `json:"delay_seconds,omitempty"`
	Source       Source  `json:"source"`
	Network      Network `json:"network,omitempty"`
	// Reason is the short plain-language cause, e.g. "insufficient funds".
	Reason string `json:"reason"`
	// Explanation is one plain sentence for the console and dead-letter records.
	Explanation string `json:"explanation"`
}

// rule is one row of a decline table.
type rule struct {
	class  Class
	action Action
	reason string
	delay  int64 // seconds, advised delays only
}

// Classify returns the classification of d. Precedence follows declines.md: the provider's
// advice code, then the Mastercard Merchant Advice Code, then the Stripe decline code (table A),
// then the raw network response code (table B). Two refinements:
//
//   - try_again_later (advice) and the "retry later" MACs decide that a retry is allowed, but a
//     lower table may still decide when (insufficient funds keeps its funded-moment timing
//     under try_again_later; a MAC delay replaces it).
//   - A Stripe code that is merely generic (do_not_honor, generic_decline, ...) says less than a
//     specific network code, so a table B code outside Visa category 4 decides instead: a Visa
//     category 1 code is never retried even when Stripe reports generic_decline.
//
// Anything unrecognised is generic: a few spaced retries within the caps.
func Classify(d Decline) Classification {
	n := normalise(d)
	lower := classifyCodes(n)
	if c, ok := classifyMAC(n, lower); ok {
		lower = c
	}
	if c, ok := classifyAdvice(n, lower); ok {
		return c
	}
	return lower
}

// normalised is a Decline with its codes in canonical form.
type normalised struct {
	code, advice, mac, network string
	brand                      Network
}

func normalise(d Decline) normalised {
	n := normalised{
		code:    strings.ToLower(strings.TrimSpace(d.Code)),
		advice:  strings.ToLower(strings.TrimSpace(d.AdviceCode)),
		mac:     strings.TrimSpace(d.NetworkAdviceCode),
		network: strings.ToUpper(strings.TrimSpace(d.NetworkDeclineCode)),
		brand:   Network(strings.ToLower(strings.TrimSpace(string(d.Network)))),
	}
	// Networks send one- and two-digit forms of the same code ("5" and "05").
	if len(n.mac) == 1 {
		n.mac = "0" + n.mac
	}
	if len(n.network) == 1 {
		n.network = "0" + n.network
	}
	return n
}

// classifyCodes applies table A, then table B, then the unknown rule.
func classifyCodes(n normalised) Classification {
	a, aok := tableA[n.code]
	b, bok := tableB[n.network]
	switch {
	case aok && a.class != ClassGeneric:
		return build(a, n.code, SourceDeclineCode, n.brand, issuerSentence(a.reason))
	case bok && b.category != 4:
		return build(b.rule, n.network, SourceNetworkCode, n.brand, networkSentence(n.network, b.reason))
	case aok:
		return build(a, n.code, SourceDeclineCode, n.brand, issuerSentence(a.reason))
	case bok:
		return build(b.rule, n.network, SourceNetworkCode, n.brand, networkSentence(n.network, b.reason))
	}
	r := rule{class: ClassGeneric, action: ActionRetrySpaced, reason: "an unrecognised reason"}
	code := n.code
	if code == "" {
		code = n.network
	}
	code = printable(code)
	sentence := "The card issuer declined for an unrecognised reason; it is treated as a generic decline."
	if code != "" {
		sentence = "The card issuer declined with the unrecognised code " + code + "; it is treated as a generic decline."
	}
	return build(r, code, SourceUnknown, n.brand, sentence)
}

// classifyMAC applies the Mastercard Merchant Advice Code. It is read for Mastercard, and for
// an unknown network, where a two-digit advice code can only be a MAC.
func classifyMAC(n normalised, lower Classification) (Classification, bool) {
	if n.mac == "" || (n.brand != NetworkMastercard && n.brand != NetworkUnknown) {
		return Classification{}, false
	}
	m, ok := macTable[n.mac]
	if !ok {
		return Classification{}, false
	}
	sentence := "Mastercard advised: " + m.reason + "."
	if m.action == ActionRetryAfter {
		// The MAC decides when; what was wrong is still best told by the decline code.
		class := lower.Class
		reason := lower.Reason
		if !lower.Retryable {
			class, reason = ClassGeneric, m.reason
		}
		c := build(rule{class: class, action: ActionRetryAfter, reason: reason, delay: m.delay}, n.mac, SourceMAC, n.brand, sentence)
		c.NotifyCustomer = lower.NotifyCustomer
		return c, true
	}
	return build(m, n.mac, SourceMAC, n.brand, sentence), true
}

// classifyAdvice applies Stripe's outcome.advice_code.
func classifyAdvice(n normalised, lower Classification) (Classification, bool) {
	a, ok := adviceTable[n.advice]
	if !ok {
		return Classification{}, false
	}
	if a.action == ActionRetrySpaced && lower.Retryable {
		// try_again_later agrees with a retryable code: keep that code's timing.
		return lower, true
	}
	sentence := "The payment provider advised: " + a.reason + "."
	if a.action == ActionRetrySpaced && lower.Reason != "" && lower.Source != SourceUnknown {
		sentence = "The payment provider advised to try again later, although the card issuer declined: " + lower.Reason + "."
	}
	return build(a, n.advice, SourceAdviceCode, n.brand, sentence), true
}

func build(r rule, code string, src Source, brand Network, sentence string) Classification {
	c := Classification{
		Class:          r.class,
		Code:           code,
		Retryable:      r.action.Retries(),
		NeedsReview:    r.action == ActionReview || r.action == ActionFixIntegration,
		NotifyCustomer: r.action == ActionRetryWhenFunded,
		Action:         r.action,
		DelaySeconds:   r.delay,
		Source:         src,
		Network:        brand,
		Reason:         r.reason,
		Explanation:    sentence,
	}
	switch r.action {
	case ActionNewPaymentMethod, ActionAskCustomer, ActionUpdateCard, ActionAccountUpdater, ActionAuthenticate:
		c.NeedsCustomer = true
	}
	return c
}

func issuerSentence(reason string) string {
	return "The card issuer declined: " + reason + "."
}

func networkSentence(code, reason string) string {
	return "The card issuer declined with response code " + code + ": " + reason + "."
}

// printable keeps an unrecognised code fit to show on a console: short, and only the
// characters real codes use.
func printable(s string) string {
	const max = 40
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			break
		}
		if r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
