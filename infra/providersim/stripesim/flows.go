package stripesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	bolt "go.etcd.io/bbolt"
)

// The payment flows: capture of an authorization, the customer's authentication (a control),
// and refunds that fail later (pm_card_refundFail).

// captureParams are the accepted parameters of POST /v1/payment_intents/{id}/capture.
type captureParams struct {
	common
	AmountToCapture int64
}

func parseCapture(form map[string][]string) (captureParams, *ParamError) {
	var p captureParams
	for key, vs := range form {
		base, segs, ok := splitParam(key)
		switch {
		case ok && base == "expand":
			if err := parseExpand(segs, vs, &p.common); err != nil {
				return p, err
			}
		case ok && base == "amount_to_capture" && len(segs) == 0:
			n, err := parseInt("amount_to_capture", last(vs))
			if err != nil {
				return p, err
			}
			if n < 1 {
				return p, &ParamError{Code: "parameter_invalid_integer", Param: "amount_to_capture",
					Message: "This value must be greater than or equal to 1."}
			}
			p.AmountToCapture = n
		default:
			return p, unknownParam(key)
		}
	}
	return p, nil
}

func unexpectedState(msg string) response {
	return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "payment_intent_unexpected_state",
		Message: msg, DocURL: "https://stripe.com/docs/error-codes/payment-intent-unexpected-state"})
}

// handleCapture is POST /v1/payment_intents/{id}/capture: a requires_capture intent takes
// amount_to_capture (default: all of amount_capturable) and succeeds; the rest of the hold is
// released (the charge's amount_captured says what was taken, nothing is refunded). Events:
// charge.captured and payment_intent.succeeded.
func (s *Simulator) handleCapture(w http.ResponseWriter, r *http.Request) {
	form, ok := parseRequest(w, r)
	if !ok {
		return
	}
	p, perr := parseCapture(form)
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	id := r.PathValue("id")
	req := requestOf(r)
	idemKey := r.Header.Get("Idempotency-Key")
	resp, replayed, err := s.idempotent(r, form, func(tx *bolt.Tx, now time.Time) (response, bool, error) {
		pi, err := loadPI(tx, id)
		if err != nil || pi == nil {
			return noSuchPI(id), false, err
		}
		if pi.Status != StatusRequiresCapture || pi.LatestCharge == nil {
			return unexpectedState(fmt.Sprintf("This PaymentIntent could not be captured because it has a status of %s. Only a PaymentIntent with one of the following statuses may be captured: requires_capture.", pi.Status)), true, nil
		}
		amount := p.AmountToCapture
		if amount == 0 {
			amount = pi.AmountCapturable
		}
		if amount > pi.AmountCapturable {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "amount_too_large", Param: "amount_to_capture",
				Message: fmt.Sprintf("The amount to capture (%d) must be less than or equal to the amount capturable (%d).", amount, pi.AmountCapturable)}), true, nil
		}
		charges := bucket(tx, bucketCharges)
		var ch charge
		if _, err := getJSON(charges, []byte(*pi.LatestCharge), &ch); err != nil {
			return response{}, false, err
		}
		ch.Captured, ch.AmountCaptured = true, amount
		ch.PaymentMethodDetails.Card.CaptureBefore = 0
		pi.Status, pi.AmountReceived, pi.AmountCapturable = StatusSucceeded, amount, 0
		if err := putJSON(charges, []byte(ch.ID), ch); err != nil {
			return response{}, false, err
		}
		if err := s.savePI(tx, pi); err != nil {
			return response{}, false, err
		}
		em := emitter{s: s, tx: tx, now: now, requestID: req.requestID, idemKey: idemKey}
		if err := em.emit(provider.EventChargeCaptured, pi.ID, jsonBody(ch)); err != nil {
			return response{}, false, err
		}
		body := jsonBody(pi)
		if err := em.emit(provider.EventPaymentIntentSucceeded, pi.ID, body); err != nil {
			return response{}, false, err
		}
		if slices.Contains(p.Expand, "latest_charge") {
			body = withCharge(body, ch)
		}
		return response{status: http.StatusOK, body: body}, true, nil
	})
	if err != nil {
		s.log.Error("capture payment intent", "err", err)
		writeInternal(w)
		return
	}
	s.finish(w, resp, replayed)
}

// AuthenticateRequest is the body of POST /_sim/payment_intents/{id}/authenticate: the
// customer completes ("succeeded") or fails ("failed") the 3-D Secure challenge of a
// requires_action PaymentIntent.
type AuthenticateRequest struct {
	Result string `json:"result"`
}

// parseAuthenticate validates an authenticate control body.
func parseAuthenticate(body io.Reader) (AuthenticateRequest, error) {
	var q AuthenticateRequest
	if err := decodeControl(body, &q); err != nil {
		return q, err
	}
	if q.Result != "succeeded" && q.Result != "failed" {
		return q, badControl("result must be succeeded or failed")
	}
	return q, nil
}

// handleAuthenticate stands in for the customer at the challenge. succeeded charges the
// PaymentMethod as the confirm would have (succeeded and payment_intent.succeeded, or
// requires_capture and payment_intent.amount_capturable_updated for manual capture; the card's
// own decline, if it has one, still applies); failed leaves the intent requires_payment_method
// with last_payment_error payment_intent_authentication_failure and sends
// payment_intent.payment_failed, as Stripe does.
func (s *Simulator) handleAuthenticate(w http.ResponseWriter, r *http.Request) {
	q, err := parseAuthenticate(r.Body)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	id := r.PathValue("id")
	var resp response
	var bad error
	err = s.db.Update(func(tx *bolt.Tx) error {
		resp, bad = response{}, nil
		pi, err := loadPI(tx, id)
		if err != nil || pi == nil {
			return err
		}
		if pi.Status != StatusRequiresAction || pi.PaymentMethod == nil {
			bad = badControl("the PaymentIntent is %s, not requires_action", pi.Status)
			return nil
		}
		now := s.now()
		em := emitter{s: s, tx: tx, now: now}
		pm := *pi.PaymentMethod
		if q.Result == "succeeded" {
			resp, _, err = s.confirmPI(tx, &em, pi, pm, now, nil, confirmOpts{authenticated: true})
			return err
		}
		card, err := paymentMethodObject(tx, pm, now)
		if err != nil {
			return err
		}
		pi.Status, pi.NextAction, pi.PaymentMethod = StatusRequiresPaymentMethod, nil, nil
		pi.LastPaymentError = &CardError{Type: errTypeInvalidRequest, Code: "payment_intent_authentication_failure", Message: msgAuthFail,
			DocURL: "https://stripe.com/docs/error-codes/payment-intent-authentication-failure", PaymentMethod: card}
		if card != nil {
			card.Customer = pi.Customer
		}
		if err := s.savePI(tx, pi); err != nil {
			return err
		}
		body := jsonBody(pi)
		resp = response{status: http.StatusOK, body: body}
		return em.emit(provider.EventPaymentIntentPaymentFailed, pi.ID, body)
	})
	switch {
	case err != nil:
		s.writeControlError(w, err)
	case bad != nil:
		s.writeControlError(w, bad)
	case resp.status == 0:
		problem.Error(w, http.StatusNotFound, "no such payment_intent")
	default:
		s.wake()
		// The intent as it is now, whatever the charge's answer was (a card that also declines
		// answers 402 through the API; the control reports the intent).
		var out json.RawMessage = resp.body
		if resp.status != http.StatusOK {
			var env struct {
				Error struct {
					PaymentIntent json.RawMessage `json:"payment_intent"`
				} `json:"error"`
			}
			if json.Unmarshal(resp.body, &env) == nil && len(env.Error.PaymentIntent) > 0 {
				out = env.Error.PaymentIntent
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// refundFailure is a refund due to fail later (pm_card_refundFail).
var bucketRefundFailures = []byte("refund_failures") // be64(due, ns) + refund id -> nothing

func init() { allBuckets = append(allBuckets, bucketRefundFailures) }

// DefaultRefundFailureDelay is how long after its creation a refund of pm_card_refundFail
// fails (Config.RefundFailureDelay), on the injected clock.
const DefaultRefundFailureDelay = 2 * time.Second

// refundFailureReason is what a pm_card_refundFail refund fails with.
const refundFailureReason = "expired_or_canceled_card"

// scheduleRefundFailure records that refund id fails at due.
func scheduleRefundFailure(tx *bolt.Tx, id string, due time.Time) error {
	return bucket(tx, bucketRefundFailures).Put(append(be64(uint64(due.UnixNano())), id...), nil)
}

// RunDue applies the asynchronous changes whose time has come on the injected clock: refunds
// of pm_card_refundFail fail (status failed, failure_reason, the charge's amount_refunded
// given back; charge.refund.updated, refund.updated and refund.failed). Start runs it on
// every pass and POST /_sim/webhooks/flush before it sends; tests with a fake clock call it.
// It returns how many changes it applied.
func (s *Simulator) RunDue() (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	now := s.now()
	due := func(k []byte) bool { return len(k) > 8 && int64(be64u(k[:8])) <= now.UnixNano() }
	// A read first: most passes find nothing due, and a write transaction would cost an fsync.
	var found bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := bucket(tx, bucketRefundFailures).Cursor().First()
		found = due(k)
		return nil
	}); err != nil || !found {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		n = 0
		c := bucket(tx, bucketRefundFailures).Cursor()
		for k, _ := c.First(); due(k); k, _ = c.First() {
			id := string(k[8:])
			if err := c.Delete(); err != nil {
				return err
			}
			if err := s.failRefund(tx, id, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if n > 0 {
		s.wake()
	}
	return n, err
}

// failRefund turns a refund to failed and gives its amount back to the charge.
func (s *Simulator) failRefund(tx *bolt.Tx, id string, now time.Time) error {
	refunds, charges := bucket(tx, bucketRefunds), bucket(tx, bucketCharges)
	var re refund
	if found, err := getJSON(refunds, []byte(id), &re); err != nil || !found || re.Status == "failed" {
		return err
	}
	var ch charge
	if _, err := getJSON(charges, []byte(re.Charge), &ch); err != nil {
		return err
	}
	re.Status, re.FailureReason = "failed", strPtr(refundFailureReason)
	ch.AmountRefunded = max(0, ch.AmountRefunded-re.Amount)
	ch.Refunded = false
	if err := putJSON(refunds, []byte(id), re); err != nil {
		return err
	}
	if err := putJSON(charges, []byte(ch.ID), ch); err != nil {
		return err
	}
	s.log.Info("refund failed", "refund", id, "payment_intent", re.PaymentIntent)
	em := emitter{s: s, tx: tx, now: now}
	body := jsonBody(re)
	for _, typ := range []string{provider.EventChargeRefundUpdated, provider.EventRefundUpdated, provider.EventRefundFailed} {
		if err := em.emit(typ, re.PaymentIntent, body); err != nil {
			return err
		}
	}
	return nil
}

// refundListParams are the accepted parameters of GET /v1/refunds.
type refundListParams struct {
	Limit         int
	StartingAfter string
	EndingBefore  string
	PaymentIntent string
	Charge        string
	Created       createdRange
}

func parseRefundList(v map[string][]string) (refundListParams, *ParamError) {
	p := refundListParams{Limit: 10}
	for key, vs := range v {
		base, segs, ok := splitParam(key)
		if !ok {
			return p, unknownParam(key)
		}
		val := last(vs)
		switch {
		case base == "created":
			if err := parseCreated(key, segs, val, &p.Created); err != nil {
				return p, err
			}
			continue
		case base == "expand":
			var c common
			if err := parseExpand(segs, vs, &c); err != nil {
				return p, err
			}
			continue
		case len(segs) > 0:
			return p, unknownParam(key)
		}
		switch base {
		case "limit":
			n, err := parseLimit(val)
			if err != nil {
				return p, err
			}
			p.Limit = n
		case "starting_after":
			p.StartingAfter = val
		case "ending_before":
			p.EndingBefore = val
		case "payment_intent":
			p.PaymentIntent = val
		case "charge":
			p.Charge = val
		default:
			return p, unknownParam(key)
		}
	}
	if p.StartingAfter != "" && p.EndingBefore != "" {
		return p, &ParamError{Code: "parameter_invalid_empty", Param: "ending_before",
			Message: "You may only specify one of these parameters: ending_before, starting_after."}
	}
	return p, nil
}

// handleRefundList is GET /v1/refunds: newest first (ids are in creation order), filtered by
// payment_intent, charge and created, paged by limit, starting_after and ending_before.
func (s *Simulator) handleRefundList(w http.ResponseWriter, r *http.Request) {
	form, ok := parseRequest(w, r)
	if !ok {
		return
	}
	p, perr := parseRefundList(form)
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	list := listResponse{Object: "list", URL: "/v1/refunds", Data: []json.RawMessage{}}
	missing := ""
	err := s.db.View(func(tx *bolt.Tx) error {
		if p.PaymentIntent != "" && bucket(tx, bucketPIs).Get([]byte(p.PaymentIntent)) == nil {
			missing = p.PaymentIntent
			return nil
		}
		c := bucket(tx, bucketRefunds).Cursor()
		forward := p.EndingBefore != ""
		var k, v []byte
		switch {
		case p.StartingAfter != "":
			if k, _ = c.Seek([]byte(p.StartingAfter)); k == nil || !bytes.Equal(k, []byte(p.StartingAfter)) {
				missing = p.StartingAfter
				return nil
			}
			k, v = c.Prev()
		case forward:
			if k, _ = c.Seek([]byte(p.EndingBefore)); k == nil || !bytes.Equal(k, []byte(p.EndingBefore)) {
				missing = p.EndingBefore
				return nil
			}
			k, v = c.Next()
		default:
			k, v = c.Last()
		}
		for ; k != nil; k, v = stepKV(c, forward) {
			var re refund
			if err := json.Unmarshal(v, &re); err != nil {
				return err
			}
			if (p.PaymentIntent != "" && re.PaymentIntent != p.PaymentIntent) || (p.Charge != "" && re.Charge != p.Charge) ||
				!p.Created.contains(re.Created) {
				continue
			}
			if len(list.Data) == p.Limit {
				list.HasMore = true
				break
			}
			list.Data = append(list.Data, bytes.Clone(v))
		}
		if forward {
			slices.Reverse(list.Data)
		}
		return nil
	})
	if err != nil {
		s.log.Error("list refunds", "err", err)
		writeInternal(w)
		return
	}
	if missing != "" {
		param, object := "starting_after", "refund"
		switch {
		case missing == p.PaymentIntent:
			param, object = "payment_intent", "payment_intent"
		case missing == p.EndingBefore:
			param = "ending_before"
		}
		writeAPIError(w, http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "resource_missing",
			Param: param, Message: fmt.Sprintf("No such %s: '%s'", object, missing)})
		return
	}
	writeResponse(w, response{status: http.StatusOK, body: jsonBody(list)})
}

// handleRefundRetrieve is GET /v1/refunds/{id}.
func (s *Simulator) handleRefundRetrieve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		body = bytes.Clone(bucket(tx, bucketRefunds).Get([]byte(id)))
		return nil
	}); err != nil {
		writeInternal(w)
		return
	}
	if body == nil {
		writeAPIError(w, http.StatusNotFound, apiError{Type: errTypeInvalidRequest, Code: "resource_missing", Param: "id",
			Message: fmt.Sprintf("No such refund: '%s'", id)})
		return
	}
	writeResponse(w, response{status: http.StatusOK, body: body})
}
