package stripesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

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

func parseCapture(form url.Values) (captureParams, *ParamError) {
	var p captureParams
	err := eachField(form, func(f field) *ParamError {
		var err *ParamError
		switch {
		case f.base == "expand":
			err = p.expand(f)
		case f.base == "amount_to_capture" && len(f.segs) == 0:
			p.AmountToCapture, err = parseAmount("amount_to_capture", f.val)
		default:
			err = unknownParam(f.key)
		}
		return err
	})
	return p, err
}

func unexpectedState(msg string) response {
	return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "payment_intent_unexpected_state",
		Message: msg}.withDoc())
}

// handleCapture is POST /v1/payment_intents/{id}/capture: a requires_capture intent takes
// amount_to_capture (default: all of amount_capturable) and succeeds; the rest of the hold is
// released (the charge's amount_captured says what was taken, nothing is refunded). Events:
// charge.captured and payment_intent.succeeded.
func (s *Simulator) handleCapture(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	resp, replayed, ok := apiWrite(s, w, r, "capture payment intent", parseCapture, func(p captureParams, em *emitter) (response, bool, error) {
		pi, err := loadPI(em.tx, id)
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
		charges := bucket(em.tx, bucketCharges)
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
		if err := em.emit(provider.EventChargeCaptured, pi.ID, jsonBody(ch)); err != nil {
			return response{}, false, err
		}
		return em.answer(pi, provider.EventPaymentIntentSucceeded, p.Expand)
	})
	if ok {
		s.finish(w, resp, replayed)
	}
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
	s.changePI(w, r.PathValue("id"), func(em *emitter, pi *PaymentIntent) (any, error) {
		if pi.Status != StatusRequiresAction || pi.PaymentMethod == nil {
			return nil, badControl("the PaymentIntent is %s, not requires_action", pi.Status)
		}
		pm := *pi.PaymentMethod
		if q.Result == "succeeded" {
			resp, _, err := s.confirmPI(em, pi, pm, nil, confirmOpts{authenticated: true})
			return intentOf(resp), err
		}
		card, err := paymentMethodObject(em.tx, pm, em.now)
		if err != nil {
			return nil, err
		}
		pi.Status, pi.NextAction, pi.PaymentMethod = StatusRequiresPaymentMethod, nil, nil
		pi.LastPaymentError = &CardError{Type: errTypeInvalidRequest, Code: "payment_intent_authentication_failure", Message: msgAuthFail,
			DocURL: docURL("payment_intent_authentication_failure"), PaymentMethod: card}
		if card != nil {
			card.Customer = pi.Customer
		}
		body, err := em.save(pi, provider.EventPaymentIntentPaymentFailed)
		return json.RawMessage(body), err
	})
}

// intentOf is the PaymentIntent in a confirm's answer, whatever the charge's answer was: a
// card that also declines answers 402 through the API, with the intent in the error.
func intentOf(resp response) json.RawMessage {
	if resp.status != http.StatusOK {
		var env struct {
			Error struct {
				PaymentIntent json.RawMessage `json:"payment_intent"`
			} `json:"error"`
		}
		if json.Unmarshal(resp.body, &env) == nil && len(env.Error.PaymentIntent) > 0 {
			return env.Error.PaymentIntent
		}
	}
	return resp.body
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
	pageParams
	PaymentIntent string
	Charge        string
}

func parseRefundList(v url.Values) (refundListParams, *ParamError) {
	p := refundListParams{pageParams: pageParams{Limit: 10}}
	err := eachField(v, func(f field) *ParamError {
		if f.base == "expand" {
			var c common // accepted, and nothing to expand
			return c.expand(f)
		}
		if ok, err := p.pageParams.field(f); ok {
			return err
		}
		switch {
		case f.base == "payment_intent" && len(f.segs) == 0:
			p.PaymentIntent = f.val
		case f.base == "charge" && len(f.segs) == 0:
			p.Charge = f.val
		default:
			return unknownParam(f.key)
		}
		return nil
	})
	if err == nil {
		err = p.oneCursor("parameter_invalid_empty")
	}
	return p, err
}

// handleRefundList is GET /v1/refunds: newest first (ids are in creation order), filtered by
// payment_intent, charge and created, paged by limit, starting_after and ending_before.
func (s *Simulator) handleRefundList(w http.ResponseWriter, r *http.Request) {
	p, _, ok := parseParams(w, r, parseRefundList)
	if !ok {
		return
	}
	list := listResponse{Object: "list", URL: "/v1/refunds"}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := bucket(tx, bucketRefunds).Cursor()
		k, v, missing := startByID(c, p.pageParams)
		if p.PaymentIntent != "" && bucket(tx, bucketPIs).Get([]byte(p.PaymentIntent)) == nil {
			missing = p.PaymentIntent
		}
		switch {
		case missing == "":
		case missing == p.PaymentIntent:
			return &missingError{param: "payment_intent", object: "payment_intent", id: missing}
		case missing == p.EndingBefore:
			return &missingError{param: "ending_before", object: "refund", id: missing}
		default:
			return &missingError{param: "starting_after", object: "refund", id: missing}
		}
		var err error
		list.Data, list.HasMore, err = collectPage(c, k, v, p.EndingBefore != "", p.Limit, func(_, v []byte) (json.RawMessage, bool, error) {
			var re refund
			if err := json.Unmarshal(v, &re); err != nil {
				return nil, false, err
			}
			if (p.PaymentIntent != "" && re.PaymentIntent != p.PaymentIntent) || (p.Charge != "" && re.Charge != p.Charge) ||
				!p.Created.contains(re.Created) {
				return nil, false, nil
			}
			return bytes.Clone(v), true, nil
		})
		return err
	})
	s.writeList(w, "list refunds", list, err)
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
		writeAPIError(w, http.StatusNotFound, resourceMissing("id", "refund", id))
		return
	}
	writeResponse(w, response{status: http.StatusOK, body: body})
}
