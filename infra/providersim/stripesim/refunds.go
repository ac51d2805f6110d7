package stripesim

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	bolt "go.etcd.io/bbolt"

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
	for key, vs := range v {
		base, segs, ok := splitParam(key)
		if !ok {
			return p, unknownParam(key)
		}
		val := last(vs)
		switch {
		case base == "expand":
			if err := parseExpand(segs, vs, &p.common); err != nil {
				return p, err
			}
			continue
		case base == "metadata" && len(segs) == 1 && segs[0] != "":
			if p.Metadata == nil {
				p.Metadata = map[string]string{}
			}
			p.Metadata[segs[0]] = val
			continue
		case len(segs) > 0:
			return p, unknownParam(key)
		}
		var err *ParamError
		switch base {
		case "payment_intent":
			p.PaymentIntent = val
		case "charge":
			p.Charge = val
		case "amount":
			p.Amount, err = parseInt("amount", val)
			if err == nil && p.Amount < 1 {
				err = &ParamError{Code: "parameter_invalid_integer", Param: "amount",
					Message: "This value must be greater than or equal to 1."}
			}
		case "reason":
			p.Reason = val
			if val != "duplicate" && val != "fraudulent" && val != "requested_by_customer" {
				err = &ParamError{Code: "parameter_invalid_string", Param: "reason",
					Message: "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"}
			}
		default:
			err = unknownParam(key)
		}
		if err != nil {
			return p, err
		}
	}
	if p.PaymentIntent == "" && p.Charge == "" {
		return p, &ParamError{Code: "parameter_missing", Param: "charge",
			Message: "One of the following params should be provided for this request: payment_intent or charge."}
	}
	return p, nil
}

// handleRefund refunds a succeeded charge (by payment_intent or charge), fully by
// default, and sends charge.refunded with the updated Charge, then refund.created. More
// than the captured amount not yet refunded is 400 amount_too_large (nothing left:
// charge_already_refunded), as at Stripe. A refund of pm_card_refundFail is succeeded now and
// fails RefundFailureDelay later (RunDue).
func (s *Simulator) handleRefund(w http.ResponseWriter, r *http.Request) {
	form, ok := parseRequest(w, r)
	if !ok {
		return
	}
	p, perr := parseRefund(form)
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	req := requestOf(r)
	idemKey := r.Header.Get("Idempotency-Key")
	resp, replayed, err := s.idempotent(r, form, func(tx *bolt.Tx, now time.Time) (response, bool, error) {
		chID := p.Charge
		if p.PaymentIntent != "" {
			pi, err := loadPI(tx, p.PaymentIntent)
			if err != nil || pi == nil {
				return noSuchPI(p.PaymentIntent), false, err
			}
			if pi.Status != StatusSucceeded || pi.LatestCharge == nil {
				return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "charge_not_refundable",
					Message: fmt.Sprintf("This PaymentIntent (%s) does not have a successful charge to refund.", pi.ID)}), true, nil
			}
			chID = *pi.LatestCharge
		}
		charges := bucket(tx, bucketCharges)
		var ch charge
		found, err := getJSON(charges, []byte(chID), &ch)
		if err != nil || !found {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "resource_missing",
				Param: "charge", Message: fmt.Sprintf("No such charge: '%s'", chID)}), false, err
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
		id, err := newID(bucket(tx, bucketRefunds), "re_")
		if err != nil {
			return response{}, false, err
		}
		md := p.Metadata
		if md == nil {
			md = map[string]string{}
		}
		re := refund{ID: id, Object: "refund", Amount: amount, Charge: chID, Created: now.Unix(), Currency: ch.Currency,
			Metadata: md, PaymentIntent: ch.PaymentIntent, Reason: strPtr(p.Reason), Status: "succeeded"}
		if err := putJSON(bucket(tx, bucketRefunds), []byte(id), re); err != nil {
			return response{}, false, err
		}
		if testCards[ch.PaymentMethod].refundFail {
			// Accepted now, failed later: the money could not reach the card.
			if err := scheduleRefundFailure(tx, id, now.Add(s.cfg.RefundFailureDelay)); err != nil {
				return response{}, false, err
			}
		}
		ch.AmountRefunded += amount
		ch.Refunded = ch.AmountRefunded == ch.AmountCaptured
		if err := putJSON(charges, []byte(chID), ch); err != nil {
			return response{}, false, err
		}
		em := emitter{s: s, tx: tx, now: now, requestID: req.requestID, idemKey: idemKey}
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
	if err != nil {
		s.log.Error("refund", "err", err)
		writeInternal(w)
		return
	}
	s.finish(w, resp, replayed)
}
