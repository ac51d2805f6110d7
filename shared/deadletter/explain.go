package deadletter

import (
	"fmt"
	"strings"
	"time"
)

// Cause is what killed a record's work, from a fixed vocabulary. The plain-language error and
// the suggested action are written per cause. (A decline's class, declines.Class, is one input:
// DeclineCause.) It is stored and filtered on as "class".
type Cause string

// The causes.
const (
	// Card declines, one per declines.Class.
	CauseDeclineHard         Cause = "decline_hard"
	CauseDeclineCancellation Cause = "decline_cancellation"
	CauseDeclineData         Cause = "decline_data"
	CauseDeclineAuth         Cause = "decline_auth"
	CauseDeclineLimit        Cause = "decline_limit"
	CauseDeclineTechnical    Cause = "decline_technical"
	CauseDeclineGeneric      Cause = "decline_generic"
	CauseDeclineReview       Cause = "decline_review"
	CauseDeclineConfig       Cause = "decline_config"

	// HTTP-level outcomes of calls to the provider.
	CauseHTTPThrottled   Cause = "http_throttled"
	CauseHTTPTransient   Cause = "http_transient"
	CauseHTTPUnknown     Cause = "http_unknown_outcome"
	CauseHTTPPermanent   Cause = "http_permanent"
	CauseHTTPCredentials Cause = "http_credentials"

	CauseSignature         Cause = "signature"
	CauseValidation        Cause = "validation"
	CauseExhaustedRecovery Cause = "exhausted_recovery"
	// CauseProcessing is a well-formed message its consumer failed on every delivery.
	CauseProcessing Cause = "processing_failed"
	// CauseFollowOnUndelivered is outbox work (a resolve job, a recovery start) whose delivery
	// kept failing; the message is still in the outbox and the relay's sweep keeps trying.
	CauseFollowOnUndelivered Cause = "follow_on_undelivered"
	// CausePoison is a message nobody can decode.
	CausePoison Cause = "poison_message"

	// Reconciliation differences.
	CauseReconMissingLocally    Cause = "recon_missing_locally"
	CauseReconMissingAtProvider Cause = "recon_missing_at_provider"
	CauseReconStatusMismatch    Cause = "recon_status_mismatch"
	CauseReconAmountMismatch    Cause = "recon_amount_mismatch"
	CauseReconDuplicateCharge   Cause = "recon_duplicate_charge"
	CauseReconStuck             Cause = "recon_stuck"
	// Refund differences: a refund missing on either side, or in another status.
	CauseReconRefundMissingLocally    Cause = "recon_refund_missing_locally"
	CauseReconRefundMissingAtProvider Cause = "recon_refund_missing_at_provider"
	CauseReconRefundStatusMismatch    Cause = "recon_refund_status_mismatch"
	// CauseReconRunFailed is a scheduled reconciliation run that failed after its retries (the
	// reconciler's on-failure destination or the schedule's dead-letter queue).
	CauseReconRunFailed Cause = "recon_run_failed"
	// CauseDisputeEvidenceDue is a dispute of a payment that waits for our evidence: only a
	// person can answer it, before the provider's deadline.
	CauseDisputeEvidenceDue Cause = "dispute_evidence_due"
	// CauseRefundFailed is a refund the provider accepted that then failed: the customer has
	// not got the money back.
	CauseRefundFailed Cause = "refund_failed"
)

// Causes lists every cause with a text, in the order the console's filter shows them.
var Causes = []Cause{
	CauseDeclineHard, CauseDeclineCancellation, CauseDeclineData, CauseDeclineAuth, CauseDeclineLimit,
	CauseDeclineTechnical, CauseDeclineGeneric, CauseDeclineReview, CauseDeclineConfig,
	CauseHTTPThrottled, CauseHTTPTransient, CauseHTTPUnknown, CauseHTTPPermanent, CauseHTTPCredentials,
	CauseSignature, CauseValidation, CauseExhaustedRecovery, CauseProcessing, CauseFollowOnUndelivered, CausePoison,
	CauseReconMissingLocally, CauseReconMissingAtProvider, CauseReconStatusMismatch,
	CauseReconAmountMismatch, CauseReconDuplicateCharge, CauseReconStuck, CauseReconRunFailed, CauseDisputeEvidenceDue,
	CauseRefundFailed, CauseReconRefundMissingLocally, CauseReconRefundMissingAtProvider, CauseReconRefundStatusMismatch,
}

// DeclineCause maps a decline class (a declines.Class, taken as its string so that the table
// links no decline vocabulary) to its cause.
func DeclineCause(c string) Cause { return Cause("decline_" + c) }

// Facts are the details a plain-language text may mention. Every field is something twice
// itself decided or a short code from a fixed vocabulary; free text from outside (error
// strings, response bodies) never goes here, so a text cannot leak internals.
type Facts struct {
	PaymentID string `json:"payment_id,omitempty"`
	Invoice   string `json:"invoice,omitempty"`
	EventID   string `json:"event_id,omitempty"`
	Provider  string `json:"provider,omitempty"`
	// DeclineCode is the provider's decline code (insufficient_funds); shown as words.
	DeclineCode string `json:"decline_code,omitempty"`
	HTTPStatus  int    `json:"http_status,omitempty"`
	// Deliveries is how many times the message was delivered before it died.
	Deliveries int `json:"deliveries,omitempty"`
	// Charges is how many charges recovery made.
	Charges int `json:"attempts,omitempty"`
	// Window is the recovery window that ended, or the reconciliation window.
	Window time.Duration `json:"window_ns,omitempty"`
	// StopReason says why recovery could not retry again: "window" (the recovery window
	// ended), "caps" (network reattempt caps), "max_attempts" (our own maximum), "hard" (the
	// decline is final).
	StopReason string `json:"stop_reason,omitempty"`
	// Local and Remote are the two sides of a reconciliation difference ("succeeded" vs
	// "declined", "1000 usd" vs "1200 usd").
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"`
}

// Explain returns the plain-language error and the suggested action for a cause.
func Explain(c Cause, f Facts) (explanation, action string) {
	if fn, ok := texts[c]; ok {
		return fn(f)
	}
	return "This work could not be completed and needs a person to look at it.",
		"Open the payload and attempts below, fix the cause, then retry or resolve."
}

var texts = map[Cause]func(Facts) (string, string){
	CauseDeclineHard:         declineHard,
	CauseDeclineCancellation: declineCancellation,
	CauseDeclineData:         declineData,
	CauseDeclineAuth:         declineAuth,
	CauseDeclineLimit:        declineLimit,
	CauseDeclineTechnical:    declineTechnical,
	CauseDeclineGeneric:      declineGeneric,
	CauseDeclineReview:       declineReview,
	CauseDeclineConfig:       declineConfig,
	CauseHTTPThrottled:       httpThrottled,
	CauseHTTPTransient:       httpTransient,
	CauseHTTPUnknown:         httpUnknown,
	CauseHTTPPermanent:       httpPermanent,
	CauseHTTPCredentials:     httpCredentials,
	CauseSignature:           signature,
	CauseValidation:          validation,
	CauseExhaustedRecovery:   exhaustedRecovery,
	CauseProcessing:          processing,
	CauseDisputeEvidenceDue: func(f Facts) (string, string) {
		return "The customer disputed payment " + name(f.PaymentID, "a payment") + " and the provider needs our evidence before its deadline, or the money goes back to the customer.",
			"Submit the order's evidence in the provider's dashboard before the deadline, or accept the dispute; then resolve this record with a note."
	},
	CauseRefundFailed: func(f Facts) (string, string) {
		return fmt.Sprintf("A refund of payment %s failed at the payment provider (%s), so the customer has not got the money back. The amount is refundable again.",
				name(f.PaymentID, "a payment"), word(codeWords(f.Remote), "no reason given")),
			"Contact the customer for another way to return the money (a new card or a bank transfer); refund again with a new Idempotency-Key, or record the payout, then resolve this record with a note."
	},
	CauseFollowOnUndelivered: func(f Facts) (string, string) {
		return "Follow-on work (queueing a payment's resolution or starting its recovery) could not be delivered" + times(f.Deliveries) +
				" after Lambda's retries. The work is not lost: it is still in the outbox table, and the relay's sweep tries it again every 15 minutes.",
			"Find the cause in the outbox-relay function's logs (the batch's shard and sequence numbers are in the payload); once fixed, the sweep delivers it. Resolve this record then."
	},
	CausePoison:              poison,
	CauseReconMissingLocally: reconMissingLocally,
	CauseReconRunFailed:      reconRunFailed,
	CauseReconMissingAtProvider: func(f Facts) (string, string) {
		return fmt.Sprintf("Payment %s is recorded here but the payment provider has no record of it.", name(f.PaymentID, "a payment")),
			"Check whether the customer was charged; if not, mark the payment failed and ask the customer to pay again."
	},
	CauseReconStatusMismatch: func(f Facts) (string, string) {
		return fmt.Sprintf("Payment %s is %s here but %s at the payment provider.", name(f.PaymentID, "a payment"), word(f.Local, "in one state"), word(f.Remote, "in another")),
			"Trust the provider's status: check the webhook deliveries for this payment, then override with the provider's status."
	},
	CauseReconAmountMismatch: func(f Facts) (string, string) {
		return fmt.Sprintf("Payment %s is for %s here but %s at the payment provider.", name(f.PaymentID, "a payment"), word(f.Local, "one amount"), word(f.Remote, "another")),
			"Find which amount the customer agreed to; refund or correct the difference, then override with a note."
	},
	CauseReconStuck: func(f Facts) (string, string) {
		return fmt.Sprintf("Payment %s has been %s for longer than it should be, and nobody has told us how it ended.", name(f.PaymentID, "a payment"), word(f.Local, "unfinished")),
			"Look the payment up at the provider: record the outcome it shows (replay its webhook or override), or, if there is no charge, mark it failed and tell the customer."
	},
	CauseReconRefundMissingLocally: func(f Facts) (string, string) {
		return fmt.Sprintf("The payment provider has a refund of payment %s (%s) that our records lack: its webhook was probably lost, or it was made in the provider's dashboard.",
				name(f.PaymentID, "a payment"), word(f.Remote, "status unknown")),
			"Replay the refund's latest event so our records adopt it, then check what the refund reverses."
	},
	CauseReconRefundMissingAtProvider: func(f Facts) (string, string) {
		return fmt.Sprintf("We hold a refund of payment %s (%s) that the payment provider does not have: the customer has not got that money back.",
				name(f.PaymentID, "a payment"), word(f.Local, "status unknown")),
			"Repeat the refund request with its own Idempotency-Key (it refunds at most once), or refund again with a new key; then resolve with a note."
	},
	CauseReconRefundStatusMismatch: func(f Facts) (string, string) {
		return fmt.Sprintf("A refund of payment %s is %s here but %s at the payment provider.", name(f.PaymentID, "a payment"),
				word(f.Local, "in one state"), word(f.Remote, "in another")),
			"Trust the provider's status: replay the refund's latest event, or override with a note."
	},
	CauseReconDuplicateCharge: func(f Facts) (string, string) {
		return fmt.Sprintf("The customer appears to have been charged more than once for %s.", name(first(f.Invoice, f.PaymentID), "one payment")),
			"Confirm the duplicate at the provider and refund it, then resolve."
	},
}

// declinePrefix is the shared opening of a decline text: "The card issuer declined:
// insufficient funds."
func declinePrefix(f Facts) string {
	if code := codeWords(f.DeclineCode); code != "" {
		return "The card issuer declined: " + code + "."
	}
	return "The card issuer declined the payment."
}

func declineHard(f Facts) (string, string) {
	return declinePrefix(f) + " The issuer will never approve this card for this payment, so no automatic retry was made.",
		"Ask the customer for a different payment method."
}

func declineCancellation(f Facts) (string, string) {
	return declinePrefix(f) + " The customer withdrew their authorization for this payment.",
		"Treat it as a cancellation: end the subscription or order; do not charge again."
}

func declineData(f Facts) (string, string) {
	return declinePrefix(f) + " The card details are wrong or out of date, so retrying the same card cannot succeed.",
		"Ask the customer to update their card details, then retry."
}

func declineAuth(f Facts) (string, string) {
	return declinePrefix(f) + " The bank wants the customer to confirm this payment themselves.",
		"Send the customer a payment link so they can authenticate, then resolve."
}

func declineLimit(f Facts) (string, string) {
	return declinePrefix(f) + stopSentence(f),
		"Tell the customer the payment failed and retry once they confirm funds are available."
}

func declineTechnical(f Facts) (string, string) {
	return declinePrefix(f) + " The problem was on the bank's or processor's side, not the customer's." + stopSentence(f),
		"Retry; if it fails again, check the provider's status page."
}

func declineGeneric(f Facts) (string, string) {
	return declinePrefix(f) + " The bank gave no specific reason." + stopSentence(f),
		"Ask the customer to contact their bank or use another card, then retry."
}

func declineReview(f Facts) (string, string) {
	return declinePrefix(f) + " The issuer thinks this may be a duplicate of an earlier payment.",
		"Look for an existing payment for the same invoice before doing anything; do not retry blindly."
}

func declineConfig(f Facts) (string, string) {
	return declinePrefix(f) + " This points at an integration mistake (for example a test card in live mode), not at the customer.",
		"Ask a developer to fix the integration; then retry."
}

// stopSentence explains why no further automatic retry happens.
func stopSentence(f Facts) string {
	switch f.StopReason {
	case "window":
		if f.Window > 0 {
			return fmt.Sprintf(" Next automatic retry was not possible because the %s recovery window ended.", days(f.Window))
		}
		return " Next automatic retry was not possible because the recovery window ended."
	case "caps":
		return " Next automatic retry was not possible because the card network's limit on retries was reached."
	case "max_attempts":
		if f.Charges > 0 {
			return fmt.Sprintf(" Automatic retries stopped after %d attempts, the configured maximum.", f.Charges)
		}
		return " Automatic retries stopped at the configured maximum."
	case "hard":
		return " The decline is final, so no automatic retry was made."
	}
	return ""
}

func httpThrottled(f Facts) (string, string) {
	return "The payment provider asked us to slow down (too many requests) and kept refusing until we gave up" + forPayment(f) + ".",
		"Wait a few minutes, then retry. If it keeps happening, check for a traffic spike or a runaway job."
}

func httpTransient(f Facts) (string, string) {
	return "The payment provider had a temporary error" + forPayment(f) + " and it did not clear within our retries. Nothing was charged by these calls.",
		"Check the provider's status page, then retry."
}

func httpUnknown(f Facts) (string, string) {
	return "We could not find out whether payment " + name(f.PaymentID, "this payment") + " went through: the provider did not answer in time, and resolving it in the background failed" + times(f.Deliveries) + ".",
		"Retry: it resolves the payment from the request the customer sent; within a day it repeats the provider call with the same idempotency key, after that it looks the payment up at the provider by its id before anything is sent, so the customer cannot be charged twice."
}

func httpPermanent(f Facts) (string, string) {
	return "The payment provider rejected the request" + forPayment(f) + " as invalid; sending it again unchanged will fail the same way.",
		"Look at the request and response in the attempts below, correct the data, then override with the outcome."
}

func httpCredentials(f Facts) (string, string) {
	return "The payment provider refused our credentials" + forPayment(f) + ". Every payment will fail until this is fixed.",
		"Check the API key in the secret store (it may have been rolled or revoked), then retry."
}

func signature(f Facts) (string, string) {
	return "A webhook" + fromProvider(f) + " arrived without a valid signature, so it was not trusted or applied.",
		"If the provider really sent it, check the webhook signing secret; then ask the provider to resend the event. Otherwise ignore."
}

func validation(f Facts) (string, string) {
	return "A message" + fromProvider(f) + " was missing required fields or had the wrong format, so it could not be applied.",
		"Look at the payload below; fix the sender or override with the intended outcome."
}

func exhaustedRecovery(f Facts) (string, string) {
	msg := "Payment recovery for " + name(first(f.Invoice, f.PaymentID), "this payment") + " ran out of automatic retries"
	if code := codeWords(f.DeclineCode); code != "" {
		msg += "; the last decline was: " + code
	}
	msg += "."
	return msg + stopSentence(f), "Contact the customer for another payment method, or override with the outcome you agreed."
}

func processing(f Facts) (string, string) {
	what := "A message"
	if safeID(f.EventID) {
		what = "Webhook event " + name(f.EventID, "(no id)") + fromProvider(f)
	}
	return what + " was received and verified, but applying it failed" + times(f.Deliveries) + ".",
		"Look at the attempts for the cause; once it is fixed, retry."
}

func poison(f Facts) (string, string) {
	return "A message could not be read at all" + times(f.Deliveries) + "; it is not in any format twice understands.",
		"Look at the payload; if it is junk, ignore it. If it came from a bug, fix the sender."
}

func reconRunFailed(f Facts) (string, string) {
	what := "A scheduled reconciliation run"
	if at, err := time.Parse(time.RFC3339, f.Local); err == nil { // only a time is shown
		what = "The reconciliation run scheduled for " + at.UTC().Format("2006-01-02 15:04 UTC")
	}
	return what + " failed after its retries, so that window was not compared with the payment provider.",
		"Fix the cause shown in the attempts, then invoke the reconciler with the payload below (the run id is the window, so running it again is safe) and resolve this record."
}

func reconMissingLocally(f Facts) (string, string) {
	return "The payment provider has payment " + name(f.PaymentID, "a payment") + " that twice has no record of (a webhook was probably missed).",
		"Check the webhook deliveries for this payment; record it by resolving once the webhook is replayed, or override with a note."
}

// codeWords turns a decline code into words ("insufficient_funds" -> "insufficient funds"),
// keeping only letters, digits and underscores so a text never carries anything else.
func codeWords(code string) string {
	var b strings.Builder
	for _, r := range code {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		case r == '_' || r == '-':
			b.WriteByte(' ')
		default:
			return ""
		}
		if b.Len() > 60 {
			return ""
		}
	}
	return strings.TrimSpace(b.String())
}

func forPayment(f Facts) string {
	if id := first(f.Invoice, f.PaymentID); safeID(id) {
		return " for " + id
	}
	return ""
}

func fromProvider(f Facts) string {
	if p := codeWords(f.Provider); p != "" {
		return " from " + p
	}
	return ""
}

func times(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return " once"
	}
	return fmt.Sprintf(" %d times", n)
}

func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d-day", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%d-hour", int(d/time.Hour))
}

func name(id, otherwise string) string {
	if safeID(id) {
		return id
	}
	return otherwise
}

func word(s, otherwise string) string {
	if s == "" || len(s) > 40 {
		return otherwise
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ' ' || r == '.' || r == '_') {
			return otherwise
		}
	}
	return s
}

// safeID accepts the identifiers twice and providers use (pay_..., in_..., evt_...).
func safeID(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
