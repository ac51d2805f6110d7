package stripesim

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/runtwice/twice/shared/provider"
)

// refundParams are the accepted parameters of POST /v1/refunds.
type refundParams struct {
	common
	PaymentIntent string
	Charge        string
	Amount        int64
	Reason        string
	Metadata      map[string]string
}

func parseRefund(v url.Values) (refundParams, *ParamError) {
	var p refundParams
	err := eachField(v, func(f field) *ParamError {
		switch {
		case f.base == "expand":
			return p.expand(f)
		case f.base == "metadata" && len(f.segs) == 1 && f.segs[0] != "":
			if p.Metadata == nil {
				p.Metadata = map[string]string{}
			}
			p.Metadata[f.segs[0]] = f.val
			return nil
		case len(f.segs) > 0:
			return unknownParam(f.key)
		}
		var err *ParamError
		switch f.base {
		case "payment_intent":
			p.PaymentIntent = f.val
		case "charge":
			p.Charge = f.val
		case "amount":
			p.Amount, err = parseAmount("amount", f.val)
		case "reason":
			p.Reason = f.val
			if f.val != "duplicate" && f.val != "fraudulent" && f.val != "requested_by_customer" {
				err = &ParamError{Code: "parameter_invalid_string", Param: "reason",
					Message: "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"}
			}
		default:
			err = unknownParam(f.key)
		}
		return err
	})
	if err == nil && p.PaymentIntent == "" && p.Charge == "" {
		err = &ParamError{Code: "parameter_missing", Param: "charge",
			Message: "One of the following params should be provided for this request: payment_intent or charge."}
	}
	return p, err
}

// handleRefund refunds a succeeded charge (by payment_intent or charge), fully by
// default, and sends charge.refunded with the updated Charge, then refund.created. More
// than the captured amount not yet refunded is 400 amount_too_large (nothing left:
// charge_already_refunded), as at Stripe. A refund of pm_card_refundFail is succeeded now and
// fails RefundFailureDelay later (RunDue).
func (s *Simulator) handleRefund(w http.ResponseWriter, r *http.Request) {
	resp, replayed, ok := apiWrite(s, w, r, "refund", parseRefund, func(p refundParams, em *emitter) (response, bool, error) {
		chID := p.Charge
		if p.PaymentIntent != "" {
			pi, err := loadPI(em.tx, p.PaymentIntent)
			if err != nil || pi == nil {
				return noSuchPI(p.PaymentIntent), false, err
			}
			if pi.Status != StatusSucceeded || pi.LatestCharge == nil {
				return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "charge_not_refundable",
					Message: fmt.Sprintf("This PaymentIntent (%s) does not have a successful charge to refund.", pi.ID)}), true, nil
			}
			chID = *pi.LatestCharge
		}
		charges := bucket(em.tx, bucketCharges)
		var ch charge
		found, err := getJSON(charges, []byte(chID), &ch)
		if err != nil || !found {
			return errorResponse(http.StatusBadRequest, resourceMissing("charge", "charge", chID)), false, err
		}
		remaining := ch.AmountCaptured - ch.AmountRefunded
		if ch.Status != "succeeded" || remaining <= 0 {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "charge_already_refunded",
				Message: fmt.Sprintf("Charge %s has already been refunded.", chID)}), true, nil
		}
		amount := p.Amount
		if amount == 0 {
			amount = remaining
		}
		if amount > remaining {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "amount_too_large", Param: "amount",
				Message: fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, remaining)}), true, nil
		}
		id, err := newID(bucket(em.tx, bucketRefunds), "re_")
		if err != nil {
			return response{}, false, err
		}
		md := p.Metadata
		if md == nil {
			md = map[string]string{}
		}
		re := refund{ID: id, Object: "refund", Amount: amount, Charge: chID, Created: em.now.Unix(), Currency: ch.Currency,
			Metadata: md, PaymentIntent: ch.PaymentIntent, Reason: strPtr(p.Reason), Status: "succeeded"}
		if err := putJSON(bucket(em.tx, bucketRefunds), []byte(id), re); err != nil {
			return response{}, false, err
		}
		if testCards[ch.PaymentMethod].refundFail {
			// Accepted now, failed later: the money could not reach the card.
			if err := scheduleRefundFailure(em.tx, id, em.now.Add(s.cfg.RefundFailureDelay)); err != nil {
				return response{}, false, err
			}
		}
		ch.AmountRefunded += amount
		ch.Refunded = ch.AmountRefunded == ch.AmountCaptured
		if err := putJSON(charges, []byte(chID), ch); err != nil {
			return response{}, false, err
		}
		// charge.refunded first: it is the event that moves a payment, and a caller that drops
		// the next delivery (POST /_sim/webhooks/drop {"count":1}) to lose a refund loses it.
		if err := em.emit(provider.EventChargeRefunded, ch.PaymentIntent, jsonBody(ch)); err != nil {
			return response{}, false, err
		}
		body := jsonBody(re)
		if err := em.emit(provider.EventRefundCreated, ch.PaymentIntent, body); err != nil {
			return response{}, false, err
		}
		return response{status: http.StatusOK, body: body}, true, nil
	})
	if ok {
		s.finish(w, resp, replayed)
	}
}
