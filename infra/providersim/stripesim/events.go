package stripesim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/runtwice/twice/shared/provider"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketDisputes = []byte("disputes") // charge id -> dispute
	metaDropRate   = []byte("drop_rate")
)

func init() { allBuckets = append(allBuckets, bucketDisputes) }

// dispute is Stripe's Dispute object (the fields a webhook consumer reads).
type dispute struct {
	ID              string            `json:"id"`
	Object          string            `json:"object"`
	Amount          int64             `json:"amount"`
	Charge          string            `json:"charge"`
	Created         int64             `json:"created"`
	Currency        string            `json:"currency"`
	EvidenceDetails evidenceDetails   `json:"evidence_details"`
	Livemode        bool              `json:"livemode"`
	Metadata        map[string]string `json:"metadata"`
	// PaymentIntent is null on a dispute that names only its charge, as Stripe's own dispute
	// fixture does (DisputeRequest.ChargeOnly).
	PaymentIntent *string `json:"payment_intent"`
	Reason        string  `json:"reason"`
	Status        string  `json:"status"`
}

type evidenceDetails struct {
	DueBy           *int64 `json:"due_by"`
	HasEvidence     bool   `json:"has_evidence"`
	PastDue         bool   `json:"past_due"`
	SubmissionCount int    `json:"submission_count"`
}

var disputeStatuses = map[string]bool{"warning_needs_response": true, "warning_under_review": true, "warning_closed": true,
	"needs_response": true, "under_review": true, "won": true, "lost": true}

func disputeClosed(s string) bool { return s == "won" || s == "lost" || s == "warning_closed" }

// dropRule is the armed webhook loss: first Count deliveries, then each event with probability
// Rate, decided by a hash of (Seed, event id), so a run with the same seed drops the same events;
// and every event about an object of one of Customers (its data.object.customer), replays
// included: a subscriber that never hears about those customers' payments.
type dropRule struct {
	Rate      float64  `json:"rate"`
	Seed      uint64   `json:"seed"`
	Customers []string `json:"customers,omitempty"`
}

func loadDropRule(tx *bolt.Tx) (dropRule, bool) {
	var r dropRule
	found, err := getJSON(bucket(tx, bucketMeta), metaDropRate, &r)
	return r, err == nil && found
}

// dropByRule reports whether the armed rule drops event id about object.
func dropByRule(tx *bolt.Tx, id string, object []byte) bool {
	r, ok := loadDropRule(tx)
	if !ok {
		return false
	}
	if r.dropsCustomerOf(object) {
		return true
	}
	if r.Rate <= 0 {
		return false
	}
	var seed [8]byte
	binary.BigEndian.PutUint64(seed[:], r.Seed)
	h := sha256.Sum256(append(seed[:], id...))
	return float64(binary.BigEndian.Uint64(h[:8])>>11)/float64(1<<53) < r.Rate
}

// dropsCustomerOf reports whether object (an event's data.object) belongs to one of the
// rule's customers.
func (r dropRule) dropsCustomerOf(object []byte) bool {
	if len(r.Customers) == 0 {
		return false
	}
	var o struct {
		Customer *string `json:"customer"`
	}
	if json.Unmarshal(object, &o) != nil || o.Customer == nil {
		return false
	}
	return slices.Contains(r.Customers, *o.Customer)
}

// maxDropCustomers bounds the customers one drop rule names.
const maxDropCustomers = 10000

// DropRequest is the body of POST /_sim/webhooks/drop. Each request replaces the armed loss:
// {"count":N} drops the next N deliveries (as before; an empty body is {"count":1});
// {"rate":R,"seed":S} then drops each later event with probability R (0 < R <= 1), chosen
// by a hash of S and the event id (deterministic; seed 0 is a seed like any other);
// {"customers":["cus_..."]} drops every later event whose object belongs to one of those
// customers, and leaves their events out of replays (the fields combine);
// {"count":0} or {"rate":0} disarms.
type DropRequest struct {
	Count     *int     `json:"count"`
	Rate      *float64 `json:"rate"`
	Seed      uint64   `json:"seed"`
	Customers []string `json:"customers"`
}

func parseDrop(q DropRequest) (int, dropRule, error) {
	count := 0
	if q.Count != nil {
		count = *q.Count
	} else if q.Rate == nil && len(q.Customers) == 0 {
		count = 1
	}
	if count < 0 || count > 1000000 {
		return 0, dropRule{}, badControl("count must be within 0..1000000")
	}
	r := dropRule{Seed: q.Seed}
	if q.Rate != nil {
		if math.IsNaN(*q.Rate) || *q.Rate < 0 || *q.Rate > 1 {
			return 0, dropRule{}, badControl("rate must be within 0..1")
		}
		r.Rate = *q.Rate
	}
	if len(q.Customers) > maxDropCustomers {
		return 0, dropRule{}, badControl("customers holds at most %d ids", maxDropCustomers)
	}
	for _, c := range q.Customers {
		if !strings.HasPrefix(c, "cus_") || len(c) > 255 {
			return 0, dropRule{}, badControl("customers must be cus_ ids of at most 255 bytes")
		}
	}
	r.Customers = q.Customers
	return count, r, nil
}

// cancelParams are the accepted parameters of POST /v1/payment_intents/{id}/cancel.
type cancelParams struct {
	common
	Reason string
}

func parseCancel(form url.Values) (cancelParams, *ParamError) {
	var p cancelParams
	err := eachField(form, func(f field) *ParamError {
		switch {
		case f.base == "expand":
			return p.expand(f)
		case f.base == "cancellation_reason" && len(f.segs) == 0:
			p.Reason = f.val
			if !slices.Contains([]string{"duplicate", "fraudulent", "requested_by_customer", "abandoned"}, p.Reason) {
				return &ParamError{Code: "parameter_invalid_string", Param: "cancellation_reason",
					Message: "Invalid cancellation_reason: must be one of duplicate, fraudulent, requested_by_customer, or abandoned"}
			}
			return nil
		}
		return unknownParam(f.key)
	})
	return p, err
}

// handleCancel is POST /v1/payment_intents/{id}/cancel: Stripe cancels an intent that has not
// succeeded, and sends payment_intent.canceled.
func (s *Simulator) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	resp, replayed, ok := apiWrite(s, w, r, "cancel payment intent", parseCancel, func(p cancelParams, em *emitter) (response, bool, error) {
		pi, err := loadPI(em.tx, id)
		if err != nil || pi == nil {
			return noSuchPI(id), false, err
		}
		if pi.Status == StatusSucceeded || pi.Status == StatusCanceled {
			return errorResponse(http.StatusBadRequest, apiError{Type: errTypeInvalidRequest, Code: "payment_intent_unexpected_state",
				Message: fmt.Sprintf("You cannot cancel this PaymentIntent because it has a status of %s. Only a PaymentIntent with one of the following statuses may be canceled: requires_payment_method, requires_capture, requires_confirmation, requires_action, processing.", pi.Status)}), true, nil
		}
		at := em.now.Unix()
		pi.Status, pi.CanceledAt, pi.CancellationReason = StatusCanceled, &at, strPtr(p.Reason)
		// A hold is released and a pending authentication abandoned.
		pi.AmountCapturable, pi.NextAction = 0, nil
		return em.answer(pi, provider.EventPaymentIntentCanceled, p.Expand)
	})
	if !ok {
		return
	}
	s.wake()
	s.finish(w, resp, replayed)
}

// DisputeRequest is the body of POST /_sim/payment_intents/{id}/dispute: the cardholder
// disputes the intent's charge (the first request: charge.dispute.created), or the dispute
// moves on (charge.dispute.updated; won, lost or warning_closed: charge.dispute.closed).
// EvidenceDueInS sets evidence_details.due_by that many seconds from now (default 7 days while
// a response is needed).
type DisputeRequest struct {
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	Amount         int64  `json:"amount"`
	EvidenceDueInS int64  `json:"evidence_due_in_s"`
	// ChargeOnly opens the dispute with payment_intent null: only its charge names the
	// payment, as in Stripe's own fixture. It applies when the dispute is created.
	ChargeOnly bool `json:"charge_only"`
}

func (s *Simulator) handleDispute(w http.ResponseWriter, r *http.Request) {
	var q DisputeRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	if q.Status == "" {
		q.Status = "needs_response"
	}
	if !disputeStatuses[q.Status] || len(q.Reason) > 64 || q.Amount < 0 || q.EvidenceDueInS < 0 || q.EvidenceDueInS > 90*86400 {
		s.writeControlError(w, badControl("status must be a Stripe dispute status, reason at most 64 bytes, amount >= 0, evidence_due_in_s within 0..7776000"))
		return
	}
	s.changePI(w, r.PathValue("id"), func(em *emitter, pi *PaymentIntent) (any, error) {
		if pi.Status != StatusSucceeded || pi.LatestCharge == nil {
			return nil, badControl("only a succeeded PaymentIntent's charge can be disputed (this one is %s)", pi.Status)
		}
		var ch charge
		if _, err := getJSON(bucket(em.tx, bucketCharges), []byte(*pi.LatestCharge), &ch); err != nil {
			return nil, err
		}
		var d dispute
		found, err := getJSON(bucket(em.tx, bucketDisputes), []byte(ch.ID), &d)
		if err != nil {
			return nil, err
		}
		typ := provider.EventDisputeUpdated
		if !found {
			typ = provider.EventDisputeCreated
			d = dispute{ID: "dp_" + ch.ID[len("ch_"):], Object: "dispute", Amount: ch.Amount, Charge: ch.ID, Created: em.now.Unix(),
				Currency: ch.Currency, Metadata: map[string]string{}, Reason: "general"}
			if !q.ChargeOnly {
				d.PaymentIntent = &pi.ID
			}
		} else if disputeClosed(d.Status) {
			return nil, badControl("the dispute %s is closed (%s)", d.ID, d.Status)
		}
		if q.Reason != "" {
			d.Reason = q.Reason
		}
		if q.Amount > 0 {
			d.Amount = min(q.Amount, ch.Amount)
		}
		d.Status = q.Status
		if disputeClosed(d.Status) {
			typ = provider.EventDisputeClosed
		}
		if d.Status == "needs_response" || d.Status == "warning_needs_response" {
			due := q.EvidenceDueInS
			if due == 0 {
				due = 7 * 86400
			}
			t := em.now.Unix() + due
			d.EvidenceDetails.DueBy = &t
		}
		if err := putJSON(bucket(em.tx, bucketDisputes), []byte(ch.ID), d); err != nil {
			return nil, err
		}
		return &d, em.emit(typ, pi.ID, jsonBody(d))
	})
}

// eventListParams are the accepted parameters of GET /v1/events.
type eventListParams struct {
	pageParams
	Types           []string
	DeliverySuccess *bool
}

func parseEventList(v url.Values) (eventListParams, *ParamError) {
	p := eventListParams{pageParams: pageParams{Limit: 10}}
	err := eachField(v, func(f field) *ParamError {
		if ok, err := p.pageParams.field(f); ok {
			return err
		}
		switch {
		case f.base == "types" && len(f.segs) == 1:
			for _, t := range f.vs {
				if len(t) == 0 || len(t) > 100 {
					return &ParamError{Code: "parameter_invalid_string", Param: "types", Message: "Invalid event type."}
				}
				p.Types = append(p.Types, t)
			}
			if len(p.Types) > 20 {
				return &ParamError{Code: "parameter_invalid_array", Param: "types", Message: "types may list at most 20 event types."}
			}
		case len(f.segs) > 0:
			return unknownParam(f.key)
		case f.base == "type":
			if len(f.val) == 0 || len(f.val) > 100 {
				return &ParamError{Code: "parameter_invalid_string", Param: "type", Message: "Invalid event type."}
			}
			p.Types = append(p.Types, f.val)
		case f.base == "delivery_success":
			b := f.val == "true"
			if !b && f.val != "false" {
				return &ParamError{Code: "parameter_invalid_boolean", Param: "delivery_success",
					Message: "Invalid boolean: " + f.val}
			}
			p.DeliverySuccess = &b
		default:
			return unknownParam(f.key)
		}
		return nil
	})
	if err == nil {
		err = p.oneCursor("parameter_invalid_string")
	}
	return p, err
}

// typeMatches is Stripe's type filter: exact, or a prefix wildcard ("charge.dispute.*").
func typeMatches(types []string, t string) bool {
	if len(types) == 0 {
		return true
	}
	for _, want := range types {
		if want == t || len(want) > 1 && want[len(want)-1] == '*' && len(t) >= len(want)-1 && t[:len(want)-1] == want[:len(want)-1] {
			return true
		}
	}
	return false
}

// handleEventList is GET /v1/events: newest first (ids are in creation order), filtered by
// type(s), created and delivery_success (true: delivered to the endpoint; false: not yet or
// never delivered: pending, retrying, failed, dropped, or recorded without a send), paged by
// limit, starting_after and ending_before with has_more.
func (s *Simulator) handleEventList(w http.ResponseWriter, r *http.Request) {
	p, _, ok := parseParams(w, r, parseEventList)
	if !ok {
		return
	}
	list := listResponse{Object: "list", URL: "/v1/events"}
	err := s.db.View(func(tx *bolt.Tx) error {
		bodies := bucket(tx, bucketEvents)
		c := bucket(tx, bucketEvState).Cursor()
		k, v, missing := startByID(c, p.pageParams)
		if missing != "" {
			return &missingError{param: "starting_after", object: "event", id: missing}
		}
		var err error
		list.Data, list.HasMore, err = collectPage(c, k, v, p.EndingBefore != "", p.Limit, func(k, v []byte) (json.RawMessage, bool, error) {
			var se storedEvent
			if err := json.Unmarshal(v, &se); err != nil {
				return nil, false, err
			}
			if !p.Created.contains(se.Created) || !typeMatches(p.Types, se.Type) ||
				p.DeliverySuccess != nil && (se.State == DeliveryDelivered) != *p.DeliverySuccess {
				return nil, false, nil
			}
			return bytes.Clone(bodies.Get(k)), true, nil
		})
		return err
	})
	s.writeList(w, "list events", list, err)
}
