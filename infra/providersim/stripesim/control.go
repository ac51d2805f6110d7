package stripesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	bolt "go.etcd.io/bbolt"
)

// maxControlBody caps /_sim request bodies.
const maxControlBody = 64 << 10

// errBadControl marks a control body the simulator rejects; its text is caller-safe.
var errBadControl = errors.New("invalid control request")

// controlError is a caller-safe reason a control body was rejected.
type controlError struct{ msg string }

func (e *controlError) Error() string   { return e.msg }
func (e *controlError) Is(t error) bool { return t == errBadControl }

func badControl(format string, a ...any) error { return &controlError{msg: fmt.Sprintf(format, a...)} }

// decodeControl decodes exactly one JSON object with no unknown fields. An empty body
// decodes as {}.
func decodeControl(body io.Reader, v any) error {
	raw, err := io.ReadAll(io.LimitReader(body, maxControlBody+1))
	if err != nil {
		return badControl("could not read the body")
	}
	if len(raw) > maxControlBody {
		return badControl("body over %d bytes", maxControlBody)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badControl("malformed JSON at offset %d", se.Offset)
		case errors.As(err, &te):
			return badControl("field %q has the wrong type", te.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badControl("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return badControl("malformed JSON")
	}
	if dec.More() {
		return badControl("trailing data after the JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := jsonBody(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeControlError answers a control request: its own validation text, never internals.
func (s *Simulator) writeControlError(w http.ResponseWriter, err error) {
	var ce *controlError
	if errors.As(err, &ce) {
		problem.Error(w, http.StatusBadRequest, ce.msg)
		return
	}
	s.log.Error("control request failed", "err", err)
	problem.Error(w, http.StatusInternalServerError, "the simulator could not complete the request")
}

// parseFault validates a POST /_sim/faults body.
func parseFault(body io.Reader) (Fault, error) {
	f := Fault{Count: 1}
	if err := decodeControl(body, &f); err != nil {
		return f, err
	}
	if !strings.HasPrefix(f.PathPrefix, "/") {
		return f, badControl("path_prefix must start with /")
	}
	switch f.Fault {
	case FaultTimeoutAfterEffect, FaultHTTP500:
	case FaultHTTP429:
		if f.RetryAfterS < 0 || f.RetryAfterS > 86400 {
			return f, badControl("retry_after_s must be within 0..86400")
		}
	case FaultLatency:
		if f.LatencyMS < 1 || f.LatencyMS > 120000 {
			return f, badControl("latency_ms must be within 1..120000")
		}
	default:
		return f, badControl("fault must be one of timeout_after_effect, http_500, http_429, latency")
	}
	if f.Count < 1 || f.Count > 1000000 {
		return f, badControl("count must be within 1..1000000")
	}
	return f, nil
}

func (s *Simulator) handleArmFault(w http.ResponseWriter, r *http.Request) {
	f, err := parseFault(r.Body)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	armed := s.faults.arm(f)
	s.log.Info("fault armed", "fault", f.Fault, "path_prefix", f.PathPrefix, "count", f.Count)
	writeJSON(w, http.StatusCreated, map[string]any{"armed": armed})
}

func (s *Simulator) handleListFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"armed": s.faults.list()})
}

func (s *Simulator) handleClearFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"cleared": s.faults.clear()})
}

// ReplayRequest is the body of POST /_sim/webhooks/replay.
type ReplayRequest struct {
	EventID string `json:"event_id"`
	Times   int    `json:"times"`
	Shuffle bool   `json:"shuffle"`
	Reverse bool   `json:"reverse"`
	DelayMS int64  `json:"delay_ms"`
}

func parseReplay(body io.Reader) (ReplayRequest, error) {
	q := ReplayRequest{Times: 1}
	if err := decodeControl(body, &q); err != nil {
		return q, err
	}
	if !strings.HasPrefix(q.EventID, "evt_") {
		return q, badControl("event_id must be an evt_ id")
	}
	if q.Times == 0 { // absent or zero: once
		q.Times = 1
	}
	if q.Times < 1 || q.Times > 100 {
		return q, badControl("times must be within 1..100")
	}
	if q.DelayMS < 0 || q.DelayMS > int64(72*time.Hour/time.Millisecond) {
		return q, badControl("delay_ms must be within 0..259200000")
	}
	if q.Shuffle && q.Reverse {
		return q, badControl("shuffle and reverse exclude each other")
	}
	return q, nil
}

// handleReplay queues one outbox entry whose events are sent one after another, in the
// order the answer lists, starting delay_ms from now:
//   - plain: the event, times times;
//   - shuffle: every event about the same PaymentIntent (object_id in GET /_sim/events:
//     data.object.id, or data.object.payment_intent for charge events), times times over,
//     in an order drawn from the simulator's random source;
//   - reverse: that same set, newest first, repeated times times.
//
// Events about a customer the armed drop rule names are left out (a replay of only those
// sends nothing): that subscriber never hears about them.
func (s *Simulator) handleReplay(w http.ResponseWriter, r *http.Request) {
	q, err := parseReplay(r.Body)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	now := s.now()
	sendAt := now.Add(time.Duration(q.DelayMS) * time.Millisecond)
	var order []string
	var objectID string
	notFound := false
	err = s.db.Update(func(tx *bolt.Tx) error {
		order, notFound = nil, false
		events := bucket(tx, bucketEvState)
		var se storedEvent
		found, err := getJSON(events, []byte(q.EventID), &se)
		if err != nil {
			return err
		}
		if !found {
			notFound = true
			return nil
		}
		objectID = se.ObjectID
		group := []string{q.EventID}
		if q.Shuffle || q.Reverse {
			group = group[:0]
			err := events.ForEach(func(k, v []byte) error {
				var o storedEvent
				if err := json.Unmarshal(v, &o); err != nil {
					return err
				}
				if o.ObjectID == se.ObjectID {
					group = append(group, string(k))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if q.Reverse {
			for i, j := 0, len(group)-1; i < j; i, j = i+1, j-1 {
				group[i], group[j] = group[j], group[i]
			}
		}
		for range q.Times {
			order = append(order, group...)
		}
		if rule, ok := loadDropRule(tx); ok && len(rule.Customers) > 0 {
			bodies := bucket(tx, bucketEvents)
			order = slices.DeleteFunc(order, func(id string) bool {
				var ev struct {
					Data struct {
						Object json.RawMessage `json:"object"`
					} `json:"data"`
				}
				return json.Unmarshal(bodies.Get([]byte(id)), &ev) == nil && rule.dropsCustomerOf(ev.Data.Object)
			})
		}
		if len(order) == 0 {
			return nil // every event it names is about a customer the drop rule silences
		}
		if q.Shuffle {
			s.randMu.Lock()
			s.rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			s.randMu.Unlock()
		}
		return enqueue(tx, delivery{EventIDs: order, NextAt: sendAt.UnixNano(), CreatedAt: now.UnixNano(), Replay: true})
	})
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	if notFound {
		problem.Error(w, http.StatusNotFound, "no such event")
		return
	}
	s.wake()
	s.log.Info("webhook replay queued", "event_id", q.EventID, "deliveries", len(order))
	writeJSON(w, http.StatusAccepted, map[string]any{"object_id": objectID, "event_ids": order, "send_at": sendAt.Unix()})
}

func (s *Simulator) handlePause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := s.db.Update(func(tx *bolt.Tx) error {
			if pause {
				return bucket(tx, bucketMeta).Put(metaPaused, []byte{1})
			}
			return bucket(tx, bucketMeta).Delete(metaPaused)
		})
		if err != nil {
			s.writeControlError(w, err)
			return
		}
		if !pause {
			s.wake()
		}
		writeJSON(w, http.StatusOK, map[string]any{"paused": pause})
	}
}

func (s *Simulator) handleDrop(w http.ResponseWriter, r *http.Request) {
	var q DropRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	count, rule, err := parseDrop(q)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := bucket(tx, bucketMeta).Put(metaDropWebhooks, be64(uint64(count))); err != nil {
			return err
		}
		return putJSON(bucket(tx, bucketMeta), metaDropRate, rule)
	})
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"drop_next": count, "rate": rule.Rate, "seed": rule.Seed, "customers": rule.Customers})
}

func (s *Simulator) handleFlush(w http.ResponseWriter, r *http.Request) {
	if _, err := s.RunDue(); err != nil {
		s.writeControlError(w, err)
		return
	}
	n, err := s.deliver(r.Context(), true)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sent": n})
}

// EventState is one row of GET /_sim/events.
type EventState struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	ObjectID    string          `json:"object_id"`
	Created     int64           `json:"created"`
	State       string          `json:"state"`
	Attempts    int             `json:"attempts"`
	Deliveries  int             `json:"deliveries"`
	LastStatus  int             `json:"last_status,omitempty"`
	LastError   string          `json:"last_error,omitempty"`
	DeliveredAt int64           `json:"delivered_at,omitempty"`
	Event       json.RawMessage `json:"event,omitempty"`
}

func (s *Simulator) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			s.writeControlError(w, badControl("limit must be within 1..10000"))
			return
		}
		limit = n
	}
	objectID, typ, state, withBody := q.Get("object_id"), q.Get("type"), q.Get("state"), q.Get("include") == "event"
	out := []EventState{}
	pending := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		pending = bucket(tx, bucketOutbox).Stats().KeyN
		bodies := bucket(tx, bucketEvents)
		c := bucket(tx, bucketEvState).Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			var se storedEvent
			if err := json.Unmarshal(v, &se); err != nil {
				return err
			}
			if (objectID != "" && se.ObjectID != objectID) || (typ != "" && se.Type != typ) || (state != "" && se.State != state) {
				continue
			}
			row := EventState{ID: string(k), Type: se.Type, ObjectID: se.ObjectID, Created: se.Created, State: se.State,
				Attempts: se.Attempts, Deliveries: se.Deliveries, LastStatus: se.LastStatus, LastError: se.LastError,
				DeliveredAt: se.DeliveredAt}
			if withBody {
				row.Event = bytes.Clone(bodies.Get(k))
			}
			out = append(out, row)
		}
		return nil
	})
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "outbox_entries": pending})
}

// Stats is the body of GET /_sim/stats. Totals come from the database (the PaymentIntents and
// events from counts kept with them, the undelivered webhooks by counting them); the other
// counters count since this process started.
type Stats struct {
	PaymentIntents        int   `json:"payment_intents"`
	Events                int   `json:"events"`
	OutboxEntries         int   `json:"outbox_entries"`
	WebhooksPaused        bool  `json:"webhooks_paused"`
	WebhookDropsArmed     int64 `json:"webhook_drops_armed"`
	FaultsArmed           int   `json:"faults_armed"`
	Requests              int64 `json:"requests"`
	PaymentIntentsCreated int64 `json:"payment_intents_created"`
	CreatesReplayed       int64 `json:"creates_replayed"`
	IdempotentReplays     int64 `json:"idempotent_replays"`
	IdempotencyErrors     int64 `json:"idempotency_errors"`
	Declines              int64 `json:"declines"`
	FaultsInjected        int64 `json:"faults_injected"`
	DeliveriesSent        int64 `json:"deliveries_sent"`
	DeliveryFailures      int64 `json:"delivery_failures"`
}

// Stats reports totals and counters (also served as GET /_sim/stats).
func (s *Simulator) Stats() (Stats, error) {
	st := Stats{
		FaultsArmed: len(s.faults.list()), Requests: s.stats.requests.Load(),
		PaymentIntentsCreated: s.stats.created.Load(), CreatesReplayed: s.stats.createReplays.Load(),
		IdempotentReplays: s.stats.replayed.Load(), IdempotencyErrors: s.stats.idemErrors.Load(),
		Declines: s.stats.declined.Load(), FaultsInjected: s.stats.faults.Load(),
		DeliveriesSent: s.stats.sent.Load(), DeliveryFailures: s.stats.sendFailures.Load(),
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		st.PaymentIntents, st.Events = count(tx, bucketPIs), count(tx, bucketEvents)
		st.OutboxEntries = bucket(tx, bucketOutbox).Stats().KeyN
		meta := bucket(tx, bucketMeta)
		st.WebhooksPaused = len(meta.Get(metaPaused)) > 0
		if raw := meta.Get(metaDropWebhooks); len(raw) == 8 {
			st.WebhookDropsArmed = int64(be64u(raw))
		}
		return nil
	})
	return st, err
}

func (s *Simulator) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.Stats()
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// CardRequest is the body of POST /_sim/cards: the next Times confirms with
// PaymentMethod decline with DeclineCode, then it behaves as before (a Stripe test card
// keeps its own behaviour; a new pm_ id succeeds as a Brand card).
type CardRequest struct {
	PaymentMethod      string `json:"payment_method"`
	Brand              string `json:"brand"`
	DeclineCode        string `json:"decline_code"`
	Code               string `json:"code"`
	Message            string `json:"message"`
	Times              int    `json:"times"`
	AdviceCode         string `json:"advice_code"`
	NetworkAdviceCode  string `json:"network_advice_code"`
	NetworkDeclineCode string `json:"network_decline_code"`
	Processing         bool   `json:"processing"`
	// Fingerprint makes this PaymentMethod one more of an existing card (1-32 alphanumerics);
	// empty: a card of its own.
	Fingerprint string `json:"fingerprint"`
}

func parseCard(body io.Reader) (cardRule, error) {
	var q CardRequest
	if err := decodeControl(body, &q); err != nil {
		return cardRule{}, err
	}
	if !strings.HasPrefix(q.PaymentMethod, "pm_") || len(q.PaymentMethod) > 255 {
		return cardRule{}, badControl("payment_method must be a pm_ id of at most 255 bytes")
	}
	if q.Times < 0 || q.Times > 1000000 {
		return cardRule{}, badControl("times must be within 0..1000000")
	}
	if q.Times > 0 && q.DeclineCode == "" {
		return cardRule{}, badControl("decline_code is required when times > 0")
	}
	switch q.Brand {
	case "":
		q.Brand = "visa"
		if c, ok := testCards[q.PaymentMethod]; ok {
			q.Brand = c.brand
		}
	case "visa", "mastercard", "amex":
	default:
		return cardRule{}, badControl("brand must be visa, mastercard or amex")
	}
	if len(q.Fingerprint) > 32 || strings.IndexFunc(q.Fingerprint, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return cardRule{}, badControl("fingerprint must be at most 32 letters and digits")
	}
	rule := cardRule{PaymentMethod: q.PaymentMethod, Brand: q.Brand, Times: q.Times, Processing: q.Processing,
		Fingerprint: q.Fingerprint}
	if q.DeclineCode != "" {
		d := &decline{Code: q.Code, DeclineCode: q.DeclineCode, Message: q.Message, AdviceCode: q.AdviceCode,
			NetworkAdviceCode: q.NetworkAdviceCode, NetworkDeclineCode: q.NetworkDeclineCode}
		if d.Code == "" {
			d.Code = errorCodeFor(q.DeclineCode)
		}
		if d.Message == "" {
			d.Message = declineMessage(q.DeclineCode)
		}
		rule.Decline = d
	}
	return rule, nil
}

func (s *Simulator) handleCards(w http.ResponseWriter, r *http.Request) {
	rule, err := parseCard(r.Body)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(bucket(tx, bucketCards), []byte(rule.PaymentMethod), rule)
	}); err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rule)
}

// SimCreateRequest is the body of POST /_sim/payment_intents: create and confirm a
// PaymentIntent as if through the API, but record its events as suppressed (never sent)
// unless Webhook is true. Created backdates it (unix seconds).
type SimCreateRequest struct {
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Customer      string            `json:"customer"`
	PaymentMethod string            `json:"payment_method"`
	Description   string            `json:"description"`
	Metadata      map[string]string `json:"metadata"`
	Created       int64             `json:"created"`
	Webhook       bool              `json:"webhook"`
}

func (s *Simulator) handleSimCreate(w http.ResponseWriter, r *http.Request) {
	var q SimCreateRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	if q.PaymentMethod == "" {
		q.PaymentMethod = "pm_card_visa"
	}
	q.Currency = strings.ToLower(q.Currency)
	if q.Amount < 1 || !validCurrency(q.Currency) {
		s.writeControlError(w, badControl("amount >= 1 and a three-letter currency are required"))
		return
	}
	var resp response
	err := s.db.Update(func(tx *bolt.Tx) error {
		if ok, err := paymentMethodExists(tx, q.PaymentMethod); err != nil || !ok {
			resp = response{}
			return err
		}
		now := s.now()
		if q.Created != 0 {
			now = time.Unix(q.Created, 0)
		}
		pi, err := s.insertPI(tx, createParams{Amount: q.Amount, Currency: q.Currency, Customer: q.Customer,
			confirmParams: confirmParams{PaymentMethod: q.PaymentMethod}, Description: q.Description, Metadata: q.Metadata,
			CaptureMethod: "automatic_async", Confirm: true}, now)
		if err != nil {
			return err
		}
		em := emitter{s: s, tx: tx, now: now, silent: !q.Webhook}
		resp, _, err = s.confirmPI(&em, pi, q.PaymentMethod, nil, confirmOpts{})
		return err
	})
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	if resp.status == 0 {
		s.writeControlError(w, badControl("unknown payment_method"))
		return
	}
	s.wake()
	writeResponse(w, resp)
}

// MutateRequest is the body of POST /_sim/payment_intents/{id}/mutate: a silent change
// (no event, no webhook) that makes the provider disagree with the local records.
type MutateRequest struct {
	Amount         *int64  `json:"amount"`
	AmountReceived *int64  `json:"amount_received"`
	Currency       *string `json:"currency"`
	Status         *string `json:"status"`
	Customer       *string `json:"customer"`
}

var piStatuses = map[string]bool{StatusRequiresPaymentMethod: true, StatusRequiresConfirmation: true,
	StatusRequiresCapture: true, StatusProcessing: true, StatusSucceeded: true, StatusCanceled: true,
	"requires_action": true}

func (s *Simulator) handleMutate(w http.ResponseWriter, r *http.Request) {
	var q MutateRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	if q.Amount != nil && *q.Amount < 1 || q.Currency != nil && !validCurrency(*q.Currency) ||
		q.Status != nil && !piStatuses[*q.Status] {
		s.writeControlError(w, badControl("amount >= 1, a three-letter lower-case currency and a PaymentIntent status are required"))
		return
	}
	s.changePI(w, r.PathValue("id"), func(em *emitter, pi *PaymentIntent) (any, error) {
		if q.Amount != nil {
			pi.Amount = *q.Amount
			if pi.Status == StatusSucceeded && q.AmountReceived == nil {
				pi.AmountReceived = *q.Amount
			}
		}
		if q.AmountReceived != nil {
			pi.AmountReceived = *q.AmountReceived
		}
		if q.Currency != nil {
			pi.Currency = *q.Currency
		}
		if q.Status != nil {
			pi.Status = *q.Status
		}
		if q.Customer != nil {
			pi.Customer = strPtr(*q.Customer)
		}
		_, err := em.save(pi, "")
		return pi, err
	})
}

// changePI runs f on the stored PaymentIntent id in one write transaction, with an emitter
// for the events it records, and answers the control: f's error (a badControl is a 400 with
// its text), 404 for an unknown id, else 200 with what f returns. f saves what it changes.
func (s *Simulator) changePI(w http.ResponseWriter, id string, f func(em *emitter, pi *PaymentIntent) (any, error)) {
	var out any
	err := s.db.Update(func(tx *bolt.Tx) error {
		out = nil
		pi, err := loadPI(tx, id)
		if err != nil || pi == nil {
			return err
		}
		out, err = f(&emitter{s: s, tx: tx, now: s.now()}, pi)
		return err
	})
	switch {
	case err != nil:
		s.writeControlError(w, err)
	case out == nil:
		problem.Error(w, http.StatusNotFound, "no such payment_intent")
	default:
		s.wake()
		writeJSON(w, http.StatusOK, out)
	}
}

// SettleRequest is the body of POST /_sim/payment_intents/{id}/settle: finish a
// PaymentIntent left in processing, with an event like any state change.
type SettleRequest struct {
	Outcome     string `json:"outcome"` // succeeded | failed
	DeclineCode string `json:"decline_code"`
}

func (s *Simulator) handleSettle(w http.ResponseWriter, r *http.Request) {
	var q SettleRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	if q.Outcome != "succeeded" && q.Outcome != "failed" {
		s.writeControlError(w, badControl("outcome must be succeeded or failed"))
		return
	}
	if q.DeclineCode == "" {
		q.DeclineCode = "generic_decline"
	}
	s.changePI(w, r.PathValue("id"), func(em *emitter, pi *PaymentIntent) (any, error) {
		if pi.Status != StatusProcessing {
			return nil, badControl("the PaymentIntent is %s, not processing", pi.Status)
		}
		typ := provider.EventPaymentIntentSucceeded
		if q.Outcome == "succeeded" {
			pi.Status, pi.AmountReceived = StatusSucceeded, pi.Amount
		} else {
			typ = provider.EventPaymentIntentPaymentFailed
			code := errorCodeFor(q.DeclineCode)
			pi.Status = StatusRequiresPaymentMethod
			pi.LastPaymentError = &CardError{Type: errTypeCard, Code: code, DeclineCode: q.DeclineCode,
				Message: declineMessage(q.DeclineCode), DocURL: docURL(code)}
			if pi.LatestCharge != nil {
				pi.LastPaymentError.Charge = *pi.LatestCharge
			}
			pi.PaymentMethod = nil
		}
		_, err := em.save(pi, typ)
		return pi, err
	})
}

// handleForget deletes a PaymentIntent silently, so that a local record has no
// counterpart at the provider (reconciliation's "missing at provider").
func (s *Simulator) handleForget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		pi, err := loadPI(tx, id)
		if err != nil || pi == nil {
			return err
		}
		found = true
		if err := bucket(tx, bucketPIByTime).Delete(timeKey(pi.Created, id)); err != nil {
			return err
		}
		if err := addCount(tx, bucketPIs, -1); err != nil {
			return err
		}
		return bucket(tx, bucketPIs).Delete([]byte(id))
	})
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	if !found {
		problem.Error(w, http.StatusNotFound, "no such payment_intent")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// CustomerEventRequest is the body of POST /_sim/customers/{id}/events: one customer-side
// event, signed and delivered like every other. Type is payment_method.attached or
// payment_method.automatically_updated (PaymentMethod is the card attached or updated),
// customer.updated (PaymentMethod becomes the default; Previous was the default before), or
// invoice.paid (Invoice, paid out of band).
type CustomerEventRequest struct {
	Type          string `json:"type"`
	PaymentMethod string `json:"payment_method"`
	Previous      string `json:"previous"`
	Invoice       string `json:"invoice"`
}

func (s *Simulator) handleCustomerEvent(w http.ResponseWriter, r *http.Request) {
	var q CustomerEventRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	cus := r.PathValue("id")
	ok := func(id, prefix string) bool { return strings.HasPrefix(id, prefix) && len(id) <= 255 }
	if !ok(cus, "cus_") {
		s.writeControlError(w, badControl("the customer must be a cus_ id of at most 255 bytes"))
		return
	}
	var objectID string
	var object, previous []byte
	now := s.now()
	switch q.Type {
	case provider.EventPaymentMethodAttached, provider.EventPaymentMethodAutomaticUpdated:
		if !ok(q.PaymentMethod, "pm_") {
			s.writeControlError(w, badControl("payment_method must be a pm_ id"))
			return
		}
		var brand, last4 string
		var rule cardRule
		if err := s.db.View(func(tx *bolt.Tx) error {
			_, err := getJSON(bucket(tx, bucketCards), []byte(q.PaymentMethod), &rule)
			return err
		}); err != nil {
			s.writeControlError(w, err)
			return
		}
		brand, last4 = rule.Brand, lastFour(rule.Brand)
		if c, known := testCards[q.PaymentMethod]; known {
			brand, last4 = c.brand, c.last4
		}
		if brand == "" {
			brand, last4 = "visa", "4242"
		}
		objectID = q.PaymentMethod
		object = jsonBody(PaymentMethod{ID: q.PaymentMethod, Object: "payment_method", Type: "card", Created: now.Unix(),
			Customer: strPtr(cus), Metadata: map[string]string{},
			Card: PaymentMethodCard{Brand: brand, Country: "US", ExpMonth: 12, ExpYear: now.Year() + 3, Funding: "credit",
				Last4: last4, Fingerprint: cardFingerprint(q.PaymentMethod, rule.Fingerprint)}})
	case provider.EventCustomerUpdated:
		if !ok(q.PaymentMethod, "pm_") || (q.Previous != "" && !ok(q.Previous, "pm_")) {
			s.writeControlError(w, badControl("payment_method (and previous, if given) must be pm_ ids"))
			return
		}
		objectID = cus
		object = jsonBody(map[string]any{"id": cus, "object": "customer", "created": now.Unix(),
			"invoice_settings": map[string]any{"default_payment_method": q.PaymentMethod}})
		previous = jsonBody(map[string]any{"invoice_settings": map[string]any{"default_payment_method": strPtr(q.Previous)}})
	case provider.EventInvoicePaid:
		if !ok(q.Invoice, "") || q.Invoice == "" {
			s.writeControlError(w, badControl("invoice is required (at most 255 bytes)"))
			return
		}
		objectID = q.Invoice
		object = jsonBody(map[string]any{"id": q.Invoice, "object": "invoice", "customer": cus, "status": "paid",
			"paid": true, "paid_out_of_band": true, "created": now.Unix()})
	default:
		s.writeControlError(w, badControl("type must be payment_method.attached, payment_method.automatically_updated, customer.updated or invoice.paid"))
		return
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		em := emitter{s: s, tx: tx, now: now}
		return em.emitChange(q.Type, objectID, object, previous)
	}); err != nil {
		s.writeControlError(w, err)
		return
	}
	s.wake()
	writeJSON(w, http.StatusOK, map[string]string{"type": q.Type, "object": objectID})
}
