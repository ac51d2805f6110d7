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
	if pi.LatestCharge != nil {
		p.AmountRefunded = pi.LatestCharge.AmountRefunded
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

// toStatus maps Stripe's PaymentIntent statuses. requires_payment_method means "declined" only
// after an attempt failed (last_payment_error set); before any attempt it is still pending.
func toStatus(pi *stripe.PaymentIntent) provider.Status {
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		if pi.LatestCharge != nil && pi.LatestCharge.Refunded {
			return provider.StatusRefunded
		}
		return provider.StatusSucceeded
	case stripe.PaymentIntentStatusProcessing, stripe.PaymentIntentStatusRequiresCapture:
		return provider.StatusProcessing
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			return provider.StatusDeclined
		}
		return provider.StatusPending
	case stripe.PaymentIntentStatusCanceled:
		return provider.StatusCanceled
	default: // requires_confirmation, requires_action, and any status added later
		return provider.StatusPending
	}
}
