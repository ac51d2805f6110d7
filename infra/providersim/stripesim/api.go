package stripesim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/provider"
)

// maxIdempotencyKey is Stripe's limit on an Idempotency-Key.
const maxIdempotencyKey = 255

// response is a finished API answer, as saved for an idempotency key.
type response struct {
	status int
	body   []byte
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are marshalled; this is a programming error
		panic(fmt.Sprintf("stripesim: marshal %T: %v", v, err))
	}
	return b
}

func errorResponse(status int, e any) response {
	return response{status: status, body: jsonBody(map[string]any{"error": e})}
}

func writeResponse(w http.ResponseWriter, resp response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.body)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

func writeAPIError(w http.ResponseWriter, status int, e apiError) {
	writeResponse(w, errorResponse(status, e))
}

func writeParamError(w http.ResponseWriter, e *ParamError) {
	writeAPIError(w, http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: e.Code, Param: e.Param,
		Message: e.Message, DocURL: docURL(e.Code)})
}

// docURL is the page of Stripe's documentation about an error code.
func docURL(code string) string {
	return "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
}

// resourceMissing is Stripe's error for a param naming an object that does not exist.
func resourceMissing(param, object, id string) apiError {
	return apiError{Type: errTypeInvalidRequest, Code: "resource_missing", Param: param,
		Message: fmt.Sprintf("No such %s: '%s'", object, id)}
}

// withDoc is e with the link to its code's documentation, as some of Stripe's answers carry.
func (e apiError) withDoc() apiError {
	e.DocURL = docURL(e.Code)
	return e
}

func writeInternal(w http.ResponseWriter) {
	writeAPIError(w, http.StatusInternalServerError, apiError{Type: errTypeAPI,
		Message: "An unknown error occurred in the simulator."})
}

// effectFunc performs a state change inside the write transaction em.tx, at em.now, and
// records its events through em. save reports whether the response belongs to the
// idempotency key (Stripe does not save requests that failed before the endpoint started
// executing).
type effectFunc func(em *emitter) (resp response, save bool, err error)

// idempotent runs effect in one bbolt transaction together with the idempotency record,
// so a key and its effect are never stored apart. Concurrent requests with one key are
// serialised by the transaction: the first executes, the rest replay.
func (s *Simulator) idempotent(r *http.Request, form url.Values, effect effectFunc) (response, bool, error) {
	req := requestOf(r)
	key := r.Header.Get("Idempotency-Key")
	fp := fingerprint(r.Method, r.URL.Path, form)
	scoped := scopeKey(req.apiKey, key)
	now := s.now()
	var (
		resp     response
		replayed bool
		mismatch bool
	)
	// Fast path: a replay needs no write transaction.
	if key != "" {
		var rec idemRecord
		var found bool
		if err := s.db.View(func(tx *bolt.Tx) error {
			var err error
			rec, found, err = getIdem(tx, scoped)
			return err
		}); err != nil {
			return response{}, false, err
		}
		if found && rec.Fingerprint == fp && now.Sub(time.Unix(0, rec.CreatedAt)) < IdempotencyKeyTTL {
			s.stats.replayed.Add(1)
			return response{status: rec.Status, body: rec.Body}, true, nil
		}
	}
	err := s.commit(r.Context(), func(tx *bolt.Tx) error {
		resp, replayed, mismatch = response{}, false, false // a group commit may run fn again
		idem := bucket(tx, bucketIdem)
		if key != "" {
			rec, found, err := getIdem(tx, scoped)
			if err != nil {
				return err
			}
			if found && now.Sub(time.Unix(0, rec.CreatedAt)) < IdempotencyKeyTTL {
				if rec.Fingerprint != fp {
					mismatch = true
					resp = errorResponse(http.StatusBadRequest, apiError{Type: errTypeIdempotency,
						Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", key)})
					return nil
				}
				resp, replayed = response{status: rec.Status, body: rec.Body}, true
				return nil
			}
		}
		var (
			save bool
			err  error
		)
		resp, save, err = effect(&emitter{s: s, tx: tx, now: now, requestID: req.requestID, idemKey: key})
		if err != nil {
			return err
		}
		if key != "" && save {
			return idem.Put(scoped, idemRecord{Fingerprint: fp, Status: resp.status, Body: resp.body,
				RequestID: req.requestID, CreatedAt: now.UnixNano()}.marshal())
		}
		return nil
	})
	if err != nil {
		return response{}, false, err
	}
	switch {
	case mismatch:
		s.stats.idemErrors.Add(1)
		s.log.Info("idempotency key reused with different parameters", "idempotency_key", key)
	case replayed:
		s.stats.replayed.Add(1)
	default:
		s.wake()
	}
	return resp, replayed, nil
}

func fingerprint(method, path string, form url.Values) [32]byte {
	return sha256.Sum256([]byte(method + " " + path + "?" + form.Encode()))
}

// scopeKey scopes an idempotency key by API key without storing the API key itself.
func scopeKey(apiKey, key string) []byte {
	h := sha256.Sum256([]byte(apiKey))
	return []byte(hex.EncodeToString(h[:8]) + ":" + key)
}

func (s *Simulator) finish(w http.ResponseWriter, resp response, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeResponse(w, resp)
}

// parseRequest reads the form and checks the Idempotency-Key; it writes the error itself.
func parseRequest(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	raw, err := readForm(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeAPIError(w, http.StatusRequestEntityTooLarge, apiError{Type: errTypeInvalidRequest,
				Message: "Request body too large."})
			return nil, false
		}
		writeAPIError(w, http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Message: "Could not read the request body."})
		return nil, false
	}
	form, err := url.ParseQuery(raw)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, apiError{Type: errTypeInvalidRequest,
			Message: "Invalid request: the body is not valid application/x-www-form-urlencoded."})
		return nil, false
	}
	if len(r.Header.Get("Idempotency-Key")) > maxIdempotencyKey {
		writeAPIError(w, http.StatusBadRequest, apiError{Type: errTypeInvalidRequest,
			Message: "Keys for idempotent requests can only be 255 characters long."})
		return nil, false
	}
	return form, true
}

// parseParams reads a request's form and parses it with the route's parse; it writes the
// error itself.
func parseParams[P any](w http.ResponseWriter, r *http.Request, parse func(url.Values) (P, *ParamError)) (P, url.Values, bool) {
	var p P
	form, ok := parseRequest(w, r)
	if !ok {
		return p, nil, false
	}
	p, perr := parse(form)
	if perr != nil {
		writeParamError(w, perr)
		return p, nil, false
	}
	return p, form, true
}

// apiWrite serves what every API write shares: it parses the form with parse and runs effect
// with the parameters under the request's idempotency key. It writes the error itself (a
// failure is logged as op) and ok is false then; else the caller writes resp with finish.
func apiWrite[P any](s *Simulator, w http.ResponseWriter, r *http.Request, op string, parse func(url.Values) (P, *ParamError),
	effect func(p P, em *emitter) (response, bool, error)) (resp response, replayed, ok bool) {
	p, form, ok := parseParams(w, r, parse)
	if !ok {
		return response{}, false, false
	}
	resp, replayed, err := s.idempotent(r, form, func(em *emitter) (response, bool, error) { return effect(p, em) })
	if err != nil {
		s.log.Error(op, "err", err)
		writeInternal(w)
		return response{}, false, false
	}
	return resp, replayed, true
}

func (s *Simulator) handleCreate(w http.ResponseWriter, r *http.Request) {
	resp, replayed, ok := apiWrite(s, w, r, "create payment intent", parseCreate, func(p createParams, em *emitter) (response, bool, error) {
		if p.PaymentMethod != "" {
			if known, err := paymentMethodExists(em.tx, p.PaymentMethod); err != nil || !known {
				return noSuchPaymentMethod(p.PaymentMethod), false, err
			}
		}
		pi, err := s.insertPI(em.tx, p, em.now)
		if err != nil {
			return response{}, false, err
		}
		if p.Confirm {
			return s.confirmPI(em, pi, p.PaymentMethod, p.Expand, confirmOpts{offSession: p.OffSession, returnURL: p.ReturnURL})
		}
		return em.answer(pi, "", p.Expand)
	})
	if !ok {
		return
	}
	switch {
	case replayed:
		s.stats.createReplays.Add(1)
	case resp.status == http.StatusOK || resp.status == http.StatusPaymentRequired:
		s.stats.created.Add(1)
	}
	s.finish(w, resp, replayed)
}

func noSuchPaymentMethod(pm string) response {
	return errorResponse(http.StatusBadRequest, resourceMissing("payment_method", "PaymentMethod", pm).withDoc())
}

func paymentMethodExists(tx *bolt.Tx, pm string) (bool, error) {
	if _, ok := testCards[pm]; ok {
		return true, nil
	}
	return bucket(tx, bucketCards).Get([]byte(pm)) != nil, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Simulator) insertPI(tx *bolt.Tx, p createParams, now time.Time) (*PaymentIntent, error) {
	id, err := newID(bucket(tx, bucketPIs), "pi_")
	if err != nil {
		return nil, err
	}
	md := p.Metadata
	if md == nil {
		md = map[string]string{}
	}
	pi := &PaymentIntent{
		ID: id, Object: "payment_intent", Amount: p.Amount, CaptureMethod: p.CaptureMethod,
		ClientSecret: id + "_secret_" + id[len(id)-8:], ConfirmationMethod: "automatic",
		Created: now.Unix(), Currency: p.Currency, Customer: strPtr(p.Customer),
		Description: strPtr(p.Description), Metadata: md, PaymentMethod: strPtr(p.PaymentMethod),
		PaymentMethodTypes: []string{"card"}, ReceiptEmail: strPtr(p.ReceiptEmail),
		Status: StatusRequiresPaymentMethod,
	}
	if pi.PaymentMethod != nil {
		pi.Status = StatusRequiresConfirmation
	}
	if err := bucket(tx, bucketPIByTime).Put(timeKey(pi.Created, id), nil); err != nil {
		return nil, err
	}
	return pi, nil
}

// save stores pi and, unless typ is empty, records the event typ about it. It returns pi's
// JSON, the event's object.
func (em *emitter) save(pi *PaymentIntent, typ string) ([]byte, error) {
	pis := bucket(em.tx, bucketPIs)
	if pis.Get([]byte(pi.ID)) == nil {
		if err := addCount(em.tx, bucketPIs, 1); err != nil {
			return nil, err
		}
	}
	if err := putJSON(pis, []byte(pi.ID), pi); err != nil {
		return nil, err
	}
	body := jsonBody(pi)
	if typ == "" {
		return body, nil
	}
	return body, em.emit(typ, pi.ID, body)
}

// answer saves pi with its event typ, as save does, and answers with pi, its latest_charge
// expanded when expand asks.
func (em *emitter) answer(pi *PaymentIntent, typ string, expand []string) (response, bool, error) {
	body, err := em.save(pi, typ)
	if err != nil {
		return response{}, false, err
	}
	if slices.Contains(expand, "latest_charge") {
		body, err = expandStored(em.tx, body)
	}
	return response{status: http.StatusOK, body: body}, true, err
}

func loadPI(tx *bolt.Tx, id string) (*PaymentIntent, error) {
	var pi PaymentIntent
	found, err := getJSON(bucket(tx, bucketPIs), []byte(id), &pi)
	if err != nil || !found {
		return nil, err
	}
	return &pi, nil
}

func noSuchPI(id string) response {
	return errorResponse(http.StatusNotFound, resourceMissing("intent", "payment_intent", id).withDoc())
}

// outcome is what a confirm does with a PaymentMethod.
type outcome struct {
	brand, last4, funding string
	fingerprint           string
	decline               *decline
	processing            bool
	authenticate          bool // the issuer requires 3-D Secure
}

// confirmOpts are what a confirm says about the customer.
type confirmOpts struct {
	offSession bool   // the customer is absent: a card that requires authentication declines
	returnURL  string // where a redirect authentication returns to
	// authenticated: the customer just completed the challenge (the authenticate control), so
	// the card's authentication requirement is met.
	authenticated bool
}

// cardOutcome decides a confirm's outcome, consuming one programmed decline if armed.
func cardOutcome(tx *bolt.Tx, pm string) (outcome, error) {
	base, known := testCards[pm]
	o := outcome{brand: base.brand, last4: base.last4, funding: base.funding, decline: base.decline,
		fingerprint: cardFingerprint(pm, ""), authenticate: base.authenticate}
	var rule cardRule
	found, err := getJSON(bucket(tx, bucketCards), []byte(pm), &rule)
	if err != nil || !found {
		return o, err
	}
	if !known {
		o = outcome{brand: rule.Brand, last4: lastFour(rule.Brand), funding: "credit"}
	}
	o.fingerprint = cardFingerprint(pm, rule.Fingerprint)
	o.processing = rule.Processing
	if rule.Times > 0 && rule.Decline != nil {
		o.decline = rule.Decline
		o.processing = false
		rule.Times--
		if err := putJSON(bucket(tx, bucketCards), []byte(pm), rule); err != nil {
			return o, err
		}
	}
	return o, nil
}

// confirmPI charges pi's PaymentMethod and records the state change and its event. A card
// that requires authentication stops on-session in requires_action (no charge yet) and
// declines off-session with authentication_required.
func (s *Simulator) confirmPI(em *emitter, pi *PaymentIntent, pm string, expand []string, opts confirmOpts) (response, bool, error) {
	tx, now := em.tx, em.now
	o, err := cardOutcome(tx, pm)
	if err != nil {
		return response{}, false, err
	}
	pi.NextAction = nil
	if o.authenticate && !opts.authenticated && o.decline == nil {
		if !opts.offSession {
			return s.requireAction(em, pi, pm, opts.returnURL)
		}
		o.decline, o.processing = authRequired, false
	}
	chID, err := newID(bucket(tx, bucketCharges), "ch_")
	if err != nil {
		return response{}, false, err
	}
	ch := charge{ID: chID, Object: "charge", Amount: pi.Amount, Created: now.Unix(), Currency: pi.Currency,
		Customer: pi.Customer, PaymentIntent: pi.ID, PaymentMethod: pm}
	ch.PaymentMethodDetails.Type = "card"
	ch.PaymentMethodDetails.Card.Brand, ch.PaymentMethodDetails.Card.Last4 = o.brand, o.last4
	ch.PaymentMethodDetails.Card.Funding, ch.PaymentMethodDetails.Card.Network = o.funding, o.brand
	ch.PaymentMethodDetails.Card.Fingerprint = o.fingerprint
	ch.Outcome = chargeOutcome{NetworkStatus: "approved_by_network", RiskLevel: "normal", RiskScore: 20,
		SellerMessage: "Payment complete.", Type: "authorized"}
	pi.LatestCharge = &chID
	pi.PaymentMethod = &pm
	switch {
	case o.decline != nil:
		d := o.decline
		ch.Status = "failed"
		ch.FailureCode, ch.FailureMessage = &d.Code, &d.Message
		ch.Outcome = chargeOutcome{AdviceCode: strPtr(d.AdviceCode), NetworkAdviceCode: strPtr(d.NetworkAdviceCode),
			NetworkDeclineCode: strPtr(d.NetworkDeclineCode), NetworkStatus: "declined_by_network",
			Reason: strPtr(d.DeclineCode), RiskLevel: "normal", RiskScore: 20,
			SellerMessage: "The bank did not return any further details with this decline.", Type: "issuer_declined"}
		pi.Status = StatusRequiresPaymentMethod
		pi.PaymentMethod = nil // Stripe detaches a declined PaymentMethod from the intent
		pi.LastPaymentError = &CardError{
			Type: errTypeCard, Code: d.Code, DeclineCode: d.DeclineCode, Message: d.Message, Param: d.Param,
			AdviceCode: d.AdviceCode, NetworkAdviceCode: d.NetworkAdviceCode, NetworkDeclineCode: d.NetworkDeclineCode,
			DocURL: "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(d.Code, "_", "-"),
			Charge: chID,
			PaymentMethod: &PaymentMethod{ID: pm, Object: "payment_method", Type: "card", Created: now.Unix(),
				Customer: pi.Customer, Metadata: map[string]string{},
				Card: PaymentMethodCard{Brand: o.brand, Country: "US", ExpMonth: 12, ExpYear: now.Year() + 3,
					Funding: o.funding, Last4: o.last4, Fingerprint: o.fingerprint}},
		}
	case o.processing:
		ch.Status = "pending"
		pi.Status = StatusProcessing
		pi.LastPaymentError = nil
	case pi.CaptureMethod == "manual":
		ch.Status = "succeeded"
		ch.Paid = true
		ch.PaymentMethodDetails.Card.CaptureBefore = now.Add(AuthorizationWindow).Unix()
		pi.Status = StatusRequiresCapture
		pi.AmountCapturable = pi.Amount
		pi.LastPaymentError = nil
	default:
		ch.Status, ch.Paid, ch.Captured, ch.AmountCaptured = "succeeded", true, true, pi.Amount
		pi.Status = StatusSucceeded
		pi.AmountReceived = pi.Amount
		pi.LastPaymentError = nil
	}
	if err := putJSON(bucket(tx, bucketCharges), []byte(chID), ch); err != nil {
		return response{}, false, err
	}
	piJSON, err := em.save(pi, map[string]string{StatusSucceeded: provider.EventPaymentIntentSucceeded,
		StatusRequiresPaymentMethod: provider.EventPaymentIntentPaymentFailed, StatusProcessing: provider.EventPaymentIntentProcessing,
		StatusRequiresCapture: provider.EventPaymentIntentCapturableUpdated}[pi.Status])
	if err != nil {
		return response{}, false, err
	}
	respJSON := piJSON
	if slices.Contains(expand, "latest_charge") {
		respJSON = withCharge(piJSON, ch)
	}
	if pi.Status == StatusRequiresPaymentMethod {
		s.stats.declined.Add(1)
		e := *pi.LastPaymentError
		e.PaymentIntent = respJSON
		e.RequestLogURL = "https://dashboard.stripe.com/test/logs/" + em.requestID
		return errorResponse(http.StatusPaymentRequired, e), true, nil
	}
	return response{status: http.StatusOK, body: respJSON}, true, nil
}

// AuthorizationWindow is how long an uncaptured card authorization holds (capture_before), as
// for most cards at Stripe.
const AuthorizationWindow = 7 * 24 * time.Hour

// requireAction leaves pi waiting for the customer to authenticate: requires_action with
// next_action (redirect_to_url when the confirm gave a return_url, else use_stripe_sdk) and
// payment_intent.requires_action. No charge exists yet; POST
// /_sim/payment_intents/{id}/authenticate stands in for the customer.
func (s *Simulator) requireAction(em *emitter, pi *PaymentIntent, pm, returnURL string) (response, bool, error) {
	pi.Status, pi.PaymentMethod, pi.LastPaymentError = StatusRequiresAction, &pm, nil
	pi.NextAction = &NextAction{Type: "use_stripe_sdk", UseStripeSDK: map[string]any{
		"type": "three_d_secure_redirect", "stripe_js": "https://hooks.stripe.com/redirect/authenticate/" + pi.ID}}
	if returnURL != "" {
		pi.NextAction = &NextAction{Type: "redirect_to_url", RedirectToURL: &RedirectToURL{
			URL: "https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_twice_sim&payment_intent=" + pi.ID, ReturnURL: returnURL}}
	}
	return em.answer(pi, provider.EventPaymentIntentRequiresAction, nil)
}

// withCharge expands latest_charge in a PaymentIntent's JSON into the Charge object.
func withCharge(piJSON []byte, ch charge) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(piJSON, &m); err != nil {
		return piJSON
	}
	m["latest_charge"] = jsonBody(ch)
	return jsonBody(m)
}

// expandStored expands latest_charge of a stored PaymentIntent from the charges bucket.
func expandStored(tx *bolt.Tx, raw []byte) ([]byte, error) {
	var ref struct {
		LatestCharge *string `json:"latest_charge"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || ref.LatestCharge == nil {
		return raw, err
	}
	var ch charge
	found, err := getJSON(bucket(tx, bucketCharges), []byte(*ref.LatestCharge), &ch)
	if err != nil || !found {
		return raw, err
	}
	return withCharge(raw, ch), nil
}

func (s *Simulator) handleConfirm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	resp, replayed, ok := apiWrite(s, w, r, "confirm payment intent", parseConfirm, func(p confirmParams, em *emitter) (response, bool, error) {
		pi, err := loadPI(em.tx, id)
		if err != nil || pi == nil {
			return noSuchPI(id), false, err
		}
		pm := p.PaymentMethod
		if pm == "" && pi.PaymentMethod != nil {
			pm = *pi.PaymentMethod
		}
		if pm == "" {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "payment_intent_unexpected_state",
				Message: "You cannot confirm this PaymentIntent because it's missing a payment method. You can either update the PaymentIntent with a payment method and then confirm it again, or confirm it again directly with a payment method."}), true, nil
		}
		if known, err := paymentMethodExists(em.tx, pm); err != nil || !known {
			return noSuchPaymentMethod(pm), false, err
		}
		if pi.Status != StatusRequiresPaymentMethod && pi.Status != StatusRequiresConfirmation {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "payment_intent_unexpected_state",
				Message: fmt.Sprintf("This PaymentIntent's status is %s, but it must be requires_payment_method or requires_confirmation to be confirmed.", pi.Status)}), true, nil
		}
		return s.confirmPI(em, pi, pm, p.Expand, confirmOpts{offSession: p.OffSession, returnURL: p.ReturnURL})
	})
	if ok {
		s.finish(w, resp, replayed)
	}
}

// parseRetrieve reads GET /v1/payment_intents/{id}: client_secret (accepted, unchecked) and
// expand.
func parseRetrieve(form url.Values) (common, *ParamError) {
	var c common
	err := eachField(form, func(f field) *ParamError {
		switch f.base {
		case "client_secret":
			return nil
		case "expand":
			return c.expand(f)
		}
		return unknownParam(f.key)
	})
	return c, err
}

func (s *Simulator) handleRetrieve(w http.ResponseWriter, r *http.Request) {
	c, _, ok := parseParams(w, r, parseRetrieve)
	if !ok {
		return
	}
	id := r.PathValue("id")
	var body []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		body = bytes.Clone(bucket(tx, bucketPIs).Get([]byte(id)))
		if body != nil && slices.Contains(c.Expand, "latest_charge") {
			var err error
			body, err = expandStored(tx, body)
			return err
		}
		return nil
	})
	if err != nil {
		writeInternal(w)
		return
	}
	if body == nil {
		writeResponse(w, noSuchPI(id))
		return
	}
	writeResponse(w, response{status: http.StatusOK, body: body})
}

// paymentMethodObject is the PaymentMethod object of a known pm id (a test card or one
// registered through POST /_sim/cards), with the card its confirms charge: the same brand,
// last4 and fingerprint. It consumes no programmed decline.
func paymentMethodObject(tx *bolt.Tx, pm string, now time.Time) (*PaymentMethod, error) {
	base, known := testCards[pm]
	var rule cardRule
	found, err := getJSON(bucket(tx, bucketCards), []byte(pm), &rule)
	if err != nil || (!known && !found) {
		return nil, err
	}
	brand, last4, funding := base.brand, base.last4, base.funding
	if !known {
		brand, last4, funding = rule.Brand, lastFour(rule.Brand), "credit"
	}
	return &PaymentMethod{ID: pm, Object: "payment_method", Type: "card", Created: now.Unix(), Metadata: map[string]string{},
		Card: PaymentMethodCard{Brand: brand, Country: "US", ExpMonth: 12, ExpYear: now.Year() + 3, Funding: funding,
			Last4: last4, Fingerprint: cardFingerprint(pm, rule.Fingerprint)}}, nil
}

// handlePaymentMethodRetrieve serves GET /v1/payment_methods/{id}: 404 resource_missing for
// an unknown id, as Stripe answers.
func (s *Simulator) handlePaymentMethodRetrieve(w http.ResponseWriter, r *http.Request) {
	form, ok := parseRequest(w, r)
	if !ok {
		return
	}
	for k := range form {
		if base, _, _ := splitParam(k); base != "expand" {
			writeParamError(w, unknownParam(k))
			return
		}
	}
	id := r.PathValue("id")
	var pm *PaymentMethod
	if err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		pm, err = paymentMethodObject(tx, id, s.now())
		return err
	}); err != nil {
		writeInternal(w)
		return
	}
	if pm == nil {
		writeResponse(w, errorResponse(http.StatusNotFound, resourceMissing("id", "PaymentMethod", id).withDoc()))
		return
	}
	writeResponse(w, response{status: http.StatusOK, body: jsonBody(pm)})
}

func (s *Simulator) handleList(w http.ResponseWriter, r *http.Request) {
	p, _, ok := parseParams(w, r, parseList)
	if !ok {
		return
	}
	list := listResponse{Object: "list", URL: "/v1/payment_intents"}
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		list.Data, list.HasMore, err = listPIs(tx, p)
		return err
	})
	s.writeList(w, "list payment intents", list, err)
}

// listPIs walks the created index newest first, as Stripe lists. With ending_before it
// walks oldest first from the cursor and reverses the page.
func listPIs(tx *bolt.Tx, p listParams) ([]json.RawMessage, bool, error) {
	pis := bucket(tx, bucketPIs)
	c := bucket(tx, bucketPIByTime).Cursor()
	k, err := startPIs(c, pis, p)
	if err != nil {
		return nil, false, err
	}
	forward := p.EndingBefore != ""
	return collectPage(c, k, nil, forward, p.Limit, func(k, _ []byte) (json.RawMessage, bool, error) {
		created := int64(be64u(k[:8]) ^ (1 << 63))
		if p.Created.set && (!forward && created < p.Created.GTE || forward && created > p.Created.LTE) {
			return nil, false, errPageEnd // the index is ordered by created: nothing further can match
		}
		raw := pis.Get(k[8:])
		var pi PaymentIntent
		if err := json.Unmarshal(raw, &pi); err != nil {
			return nil, false, err
		}
		if !p.Created.contains(pi.Created) || p.Customer != "" && (pi.Customer == nil || *pi.Customer != p.Customer) {
			return nil, false, nil
		}
		if slices.Contains(p.Expand, "data.latest_charge") {
			out, err := expandStored(tx, raw)
			return bytes.Clone(out), true, err
		}
		return bytes.Clone(raw), true, nil
	})
}

// startPIs places c on the created index where a page of PaymentIntents starts: before
// starting_after, after ending_before, at the newest created at or before created[lte], or
// at the newest.
func startPIs(c *bolt.Cursor, pis *bolt.Bucket, p listParams) ([]byte, error) {
	seek := func(id string) error {
		var pi PaymentIntent
		found, err := getJSON(pis, []byte(id), &pi)
		switch {
		case err != nil:
			return err
		case !found: // named starting_after whichever cursor it was
			return &missingError{param: "starting_after", object: "payment_intent", id: id}
		}
		c.Seek(timeKey(pi.Created, id))
		return nil
	}
	var k []byte
	switch {
	case p.StartingAfter != "":
		if err := seek(p.StartingAfter); err != nil {
			return nil, err
		}
		k, _ = c.Prev()
	case p.EndingBefore != "":
		if err := seek(p.EndingBefore); err != nil {
			return nil, err
		}
		k, _ = c.Next()
	case p.Created.set && p.Created.LTE != maxInt64:
		if sk, _ := c.Seek(timeKey(p.Created.LTE+1, "")); sk == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	default:
		k, _ = c.Last()
	}
	return k, nil
}

func be64u(b []byte) uint64 {
	var n uint64
	for _, x := range b {
		n = n<<8 | uint64(x)
	}
	return n
}

// apiVersion is the version stamped on events: the one stripe-go v82 expects, so that
// webhook.ConstructEvent accepts them without IgnoreAPIVersionMismatch.
var apiVersion = stripe.APIVersion
