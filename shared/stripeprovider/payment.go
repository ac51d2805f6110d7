package stripeprovider

import (
	"encoding/json"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/stripe/stripe-go/v82"
)

// adviceFields are decline fields Stripe sends on its error object that stripe-go v82.5.1 does
// not model on stripe.Error; they are read from the raw JSON.
type adviceFields struct {
	AdviceCode         string `json:"advice_code"`
	NetworkAdviceCode  string `json:"network_advice_code"`
	NetworkDeclineCode string `json:"network_decline_code"`
}

// adviceFromErrorBody reads them from an error response: {"error": {...}}.
func adviceFromErrorBody(raw []byte) adviceFields {
	var body struct {
		Error adviceFields `json:"error"`
	}
	_ = json.Unmarshal(raw, &body) // absent or malformed: no advice, the codes still classify
	return body.Error
}

// adviceFromPaymentIntent reads them from a PaymentIntent's last_payment_error.
func adviceFromPaymentIntent(raw []byte) adviceFields {
	var body struct {
		LastPaymentError adviceFields `json:"last_payment_error"`
	}
	_ = json.Unmarshal(raw, &body)
	return body.LastPaymentError
}

func toDecline(e *stripe.Error, advice adviceFields) *provider.Decline {
	d := &provider.Decline{
		Code:               string(e.DeclineCode),
		ErrorCode:          string(e.Code),
		AdviceCode:         advice.AdviceCode,
		NetworkAdviceCode:  advice.NetworkAdviceCode,
		NetworkDeclineCode: advice.NetworkDeclineCode,
		Message:            e.Msg,
	}
	if d.Code == "" {
		// expired_card, incorrect_cvc and processing_error arrive as the error code alone.
		d.Code = d.ErrorCode
	}
	if e.PaymentMethod != nil && e.PaymentMethod.Card != nil {
		d.Network = string(e.PaymentMethod.Card.Brand)
	}
	return d
}

// toPayment maps a PaymentIntent to our vocabulary. raw is its JSON when known (for the
// advice codes of a decline); list items have none.
func toPayment(pi *stripe.PaymentIntent, raw []byte) provider.Payment {
	p := provider.Payment{
		ID:          pi.ID,
		Status:      toStatus(pi),
		Amount:      pi.Amount,
		Currency:    string(pi.Currency),
		Description: pi.Description,
		Created:     time.Unix(pi.Created, 0).UTC(),
		Metadata:    pi.Metadata,
	}
	if pi.Customer != nil {
		p.Customer = pi.Customer.ID
	}
	p.CaptureMethod = provider.CaptureAutomatic
	if pi.CaptureMethod == stripe.PaymentIntentCaptureMethodManual {
		p.CaptureMethod = provider.CaptureManual
	}
	p.AmountCapturable, p.AmountReceived = pi.AmountCapturable, pi.AmountReceived
	p.CancellationReason = string(pi.CancellationReason)
	if ch := pi.LatestCharge; ch != nil {
		p.LatestCharge = ch.ID
		p.AmountRefunded = ch.AmountRefunded // zero when latest_charge came as an id only
		if d := ch.PaymentMethodDetails; d != nil && d.Card != nil && d.Card.CaptureBefore > 0 && p.Status == provider.StatusRequiresCapture {
			p.CaptureBefore = time.Unix(d.Card.CaptureBefore, 0).UTC()
		}
	}
	if p.Status == provider.StatusRequiresAction {
		// Only a payment waiting for the customer hands its secret out: the browser needs it
		// for this step and for nothing else.
		p.ClientSecret = provider.ClientSecret(pi.ClientSecret)
		if na := pi.NextAction; na != nil {
			p.NextAction = &provider.NextAction{Type: string(na.Type)}
			if na.RedirectToURL != nil {
				p.NextAction.RedirectURL = na.RedirectToURL.URL
			}
		}
	}
	if pi.PaymentMethod != nil {
		p.PaymentMethod = pi.PaymentMethod.ID
	}
	if pi.PaymentMethod != nil {
		p.Card = toCard(pi.PaymentMethod) // set when the PaymentMethod came expanded
	}
	if p.Status == provider.StatusDeclined {
		p.Decline = toDecline(pi.LastPaymentError, adviceFromPaymentIntent(raw))
		if p.PaymentMethod == "" && pi.LastPaymentError.PaymentMethod != nil {
			p.PaymentMethod = pi.LastPaymentError.PaymentMethod.ID
		}
		if c := toCard(pi.LastPaymentError.PaymentMethod); c != nil {
			p.Card = c
		}
	}
	return p
}

// toCard reads the card of a PaymentMethod object; nil when it is only an id or has no
// fingerprint.
func toCard(pm *stripe.PaymentMethod) *provider.Card {
	if pm == nil || pm.Card == nil || pm.Card.Fingerprint == "" {
		return nil
	}
	return &provider.Card{Fingerprint: pm.Card.Fingerprint, Brand: string(pm.Card.Brand), Last4: pm.Card.Last4}
}

// toStatus maps Stripe's PaymentIntent statuses; provider.Status documents the table. No state
// maps to "pending": that word is the payments API's, for an outcome it does not know.
// requires_payment_method means "declined" only after an attempt failed (last_payment_error
// set; a failed authentication included); before any attempt it waits for a payment method, as
// requires_confirmation waits for a confirmation: both wait for the customer's side, like
// requires_action.
func toStatus(pi *stripe.PaymentIntent) provider.Status {
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		if pi.LatestCharge != nil && pi.LatestCharge.Refunded {
			return provider.StatusRefunded
		}
		return provider.StatusSucceeded
	case stripe.PaymentIntentStatusRequiresCapture:
		return provider.StatusRequiresCapture
	case stripe.PaymentIntentStatusRequiresAction, stripe.PaymentIntentStatusRequiresConfirmation:
		return provider.StatusRequiresAction
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			return provider.StatusDeclined
		}
		return provider.StatusRequiresAction
	case stripe.PaymentIntentStatusCanceled:
		return provider.StatusCanceled
	default: // processing, and any status added later: not final, look again
		return provider.StatusProcessing
	}
}

// toRefund maps a Stripe Refund. requires_action (a refund to a non-card method waiting for
// the customer's details) is pending for us: not settled yet.
func toRefund(r *stripe.Refund) provider.Refund {
	out := provider.Refund{ID: r.ID, Amount: r.Amount, Currency: string(r.Currency), Reason: provider.RefundReason(r.Reason),
		FailureReason: string(r.FailureReason), Created: time.Unix(r.Created, 0).UTC(), Metadata: r.Metadata}
	if r.PaymentIntent != nil {
		out.Payment = r.PaymentIntent.ID
	} else if r.Charge != nil && r.Charge.PaymentIntent != nil {
		out.Payment = r.Charge.PaymentIntent.ID
	}
	switch r.Status {
	case stripe.RefundStatusSucceeded:
		out.Status = provider.RefundSucceeded
	case stripe.RefundStatusFailed:
		out.Status = provider.RefundFailed
	case stripe.RefundStatusCanceled:
		out.Status = provider.RefundCanceled
	default: // pending, requires_action, and any status added later
		out.Status = provider.RefundPending
	}
	return out
}
