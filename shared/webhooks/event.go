package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Delivery is what the ingest handler hands to the queue once a request is verified: the raw
// body byte for byte (the worker decodes it) and only the headers the worker needs. No
// signature travels: verification is done, and a signature in a queue is one more place to leak.
type Delivery struct {
	Provider   string            `json:"provider"`
	EventID    string            `json:"event_id"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       []byte            `json:"body"`
	ReceivedAt time.Time         `json:"received_at"`
}

// KeptHeaders lists the request headers a Delivery carries for provider. Stripe events are
// self-contained; a Standard Webhooks payload has no id of its own, so webhook-id travels with it.
func KeptHeaders(provider string) []string {
	if provider == ProviderStandard {
		return []string{StandardIDHeader, StandardTimestampHeader}
	}
	return nil
}

// NewDelivery builds the Delivery for a verified request. The event id comes from the body for
// Stripe and from webhook-id for Standard Webhooks; it is empty when the body does not carry one
// (the worker then decodes, fails and dead-letters: a verified delivery is never dropped here).
func NewDelivery(provider string, h http.Header, body []byte, receivedAt time.Time) Delivery {
	d := Delivery{Provider: provider, Body: body, ReceivedAt: receivedAt}
	if keep := KeptHeaders(provider); len(keep) > 0 {
		d.Headers = make(map[string]string, len(keep))
		for _, k := range keep {
			if v := h.Get(k); v != "" {
				d.Headers[k] = v
			}
		}
	}
	switch provider {
	case ProviderStandard:
		d.EventID = h.Get(StandardIDHeader)
	default:
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &e) == nil {
			d.EventID = e.ID
		}
	}
	return d
}

// Event is a provider event in one shape: what payments.Applier applies.
type Event struct {
	Provider string
	// ID is the provider's event id (Stripe evt_..., Standard webhook-id): the first dedupe key.
	ID   string
	Type string
	// ObjectType, ObjectID and ObjectVersion place the event on one object's history: the
	// ordering guard applies an event only if its version is above the one already applied.
	// For charge.refunded the object is the charge's PaymentIntent, so a refund orders after
	// the success it reverses.
	ObjectType    string
	ObjectID      string
	ObjectVersion int64
	Created       time.Time

	// PaymentIntent is set for payment_intent.* events, and for charge.refunded (with what the
	// charge tells about its PaymentIntent: ID, amount, currency, customer, metadata).
	PaymentIntent *PaymentIntent
	// Charge is set for charge.* events.
	Charge *Charge
	// Steer is set for the customer-side events that steer a running recovery:
	// payment_method.attached, payment_method.automatically_updated, customer.updated with a
	// new default payment method, invoice.paid.
	Steer *Steer
	// Dispute is set for charge.dispute.* events (then ObjectID is the disputed PaymentIntent,
	// so a dispute orders on its payment's history like a refund).
	Dispute *Dispute
	// Refund is set for events whose object is a refund (refund.created, refund.updated,
	// refund.failed, charge.refund.updated). ObjectID is the refund: a refund orders on its own
	// lifecycle (its status), not on its payment's.
	Refund *Refund

	// Raw is the delivery body as received.
	Raw json.RawMessage
}

// Steer is what a customer-side event tells a running recovery. Every field is capped.
type Steer struct {
	Customer      string
	PaymentMethod string // the new or updated payment method (the new default, for customer.updated)
	Invoice       string // invoice.paid: the invoice paid
}

// maxRef caps a Stripe id read from an event before it is stored or logged.
const maxRef = 255

func capRef(s expandable) string {
	if len(s) > maxRef {
		return string(s[:maxRef])
	}
	return string(s)
}

// PaymentIntent holds the fields of a Stripe PaymentIntent the worker needs.
type PaymentIntent struct {
	ID               string            `json:"id"`
	Status           string            `json:"status"`
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Customer         string            `json:"customer"`
	Metadata         map[string]string `json:"metadata"`
	LastPaymentError *PaymentError     `json:"last_payment_error"`
	// AmountCapturable is what a capture may take (payment_intent.amount_capturable_updated).
	AmountCapturable int64 `json:"amount_capturable"`
	// NextAction is what the customer must do (payment_intent.requires_action).
	NextAction *NextAction `json:"next_action"`
	// CancellationReason says why a canceled PaymentIntent was canceled.
	CancellationReason string `json:"cancellation_reason"`
	// LatestCharge is the id of the PaymentIntent's latest charge (its latest_charge, an id or
	// an expanded object), or the charge a charge event is about.
	LatestCharge string `json:"-"`
}

// NextAction is a PaymentIntent's next_action: its type, and the URL of a redirect_to_url.
// Nothing else of it is read (use_stripe_sdk's contents are for Stripe.js).
type NextAction struct {
	Type          string `json:"type"`
	RedirectToURL *struct {
		URL string `json:"url"`
	} `json:"redirect_to_url"`
}

// PaymentError is the decline detail of a failed PaymentIntent, in the order the decline tables
// read it (advice code, network advice code, decline code).
type PaymentError struct {
	Type               string `json:"type"`
	Code               string `json:"code"`
	DeclineCode        string `json:"decline_code"`
	AdviceCode         string `json:"advice_code"`
	NetworkAdviceCode  string `json:"network_advice_code"`
	NetworkDeclineCode string `json:"network_decline_code"`
	// PaymentMethod is the declined card, when Stripe sends it: its brand decides which
	// network's retry caps apply.
	PaymentMethod *struct {
		Card *struct {
			Brand       string `json:"brand"`
			Fingerprint string `json:"fingerprint"`
			Last4       string `json:"last4"`
		} `json:"card"`
	} `json:"payment_method"`
}

// Card is the declined card as the event names it (fingerprint, brand, last4, each capped),
// or nil when it names no fingerprint: the network caps are counted per card.
func (e *PaymentError) Card() *provider.Card {
	if e == nil || e.PaymentMethod == nil || e.PaymentMethod.Card == nil || e.PaymentMethod.Card.Fingerprint == "" {
		return nil
	}
	c := e.PaymentMethod.Card
	return &provider.Card{Fingerprint: capRef(expandable(c.Fingerprint)), Brand: capRef(expandable(c.Brand)), Last4: capRef(expandable(c.Last4))}
}

// Brand is the declined card's brand ("visa", "mastercard"), or "".
func (e *PaymentError) Brand() string {
	if e == nil || e.PaymentMethod == nil || e.PaymentMethod.Card == nil {
		return ""
	}
	return e.PaymentMethod.Card.Brand
}

// Charge holds the fields of a Stripe Charge the worker needs.
type Charge struct {
	ID              string `json:"id"`
	PaymentIntentID string `json:"payment_intent"`
	Amount          int64  `json:"amount"`
	AmountRefunded  int64  `json:"amount_refunded"`
	Refunded        bool   `json:"refunded"`
}

// Dispute holds the fields of a Stripe Dispute the worker needs.
type Dispute struct {
	ID              string `json:"id"`
	ChargeID        string `json:"charge"`
	PaymentIntentID string `json:"payment_intent"`
	Amount          int64  `json:"amount"`
	Currency        string `json:"currency"`
	Status          string `json:"status"`
	Reason          string `json:"reason"`
	// EvidenceDueBy is evidence_details.due_by (unix seconds), 0 when none.
	EvidenceDueBy int64 `json:"-"`
}

// Refund holds the fields of a Stripe Refund the worker needs.
type Refund struct {
	ID              string            `json:"id"`
	Amount          int64             `json:"amount"`
	Currency        string            `json:"currency"`
	ChargeID        string            `json:"-"`
	PaymentIntentID string            `json:"-"`
	Status          string            `json:"status"`
	Reason          string            `json:"-"`
	FailureReason   string            `json:"-"`
	Created         int64             `json:"created"`
	Metadata        map[string]string `json:"metadata"`
}

// Decode turns a verified delivery into an Event. The error wraps ErrBadPayload.
func Decode(d Delivery) (Event, error) {
	switch d.Provider {
	case ProviderStripe:
		return DecodeStripe(d.Body)
	case ProviderStandard:
		return DecodeStandard(d.Headers[StandardIDHeader], d.Body)
	default:
		return Event{}, ErrUnknownProvider
	}
}

// rankSlots is how many ranks fit under one second of `created` in an ObjectVersion.
const rankSlots = 16

// StripeVersion is the ObjectVersion of a Stripe event: created seconds, then the event's rank
// on its payment's history within that second (provider.EventRank, the one order table).
func StripeVersion(created int64, eventType string) int64 {
	return created*rankSlots + provider.EventRank(eventType)
}

type stripeEnvelope struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object             json.RawMessage `json:"object"`
		PreviousAttributes json.RawMessage `json:"previous_attributes"`
	} `json:"data"`
}

// stripeSteerObject holds the fields of a payment method, customer or invoice a steering
// event needs.
type stripeSteerObject struct {
	Customer        expandable `json:"customer"`
	InvoiceSettings *struct {
		DefaultPaymentMethod expandable `json:"default_payment_method"`
	} `json:"invoice_settings"`
}

type stripeObject struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

// stripePI mirrors a PaymentIntent where customer may be an id or an expanded object.
type stripePI struct {
	PaymentIntent
	Customer     expandable `json:"customer"`
	LatestCharge expandable `json:"latest_charge"`
}

type stripeCharge struct {
	Charge
	PaymentIntent expandable        `json:"payment_intent"`
	Currency      string            `json:"currency"`
	Customer      expandable        `json:"customer"`
	Metadata      map[string]string `json:"metadata"`
}

// expandable is a Stripe reference: an id string, or the expanded object carrying "id".
type expandable string

func (e *expandable) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		*e = ""
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*e = expandable(s)
		return nil
	}
	var o stripeObject
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*e = expandable(o.ID)
	return nil
}

// DecodeStripe decodes a Stripe event body (https://docs.stripe.com/api/events/object).
// Types the worker acts on get their object decoded; any other type still yields a generic
// Event with its object's id and type.
func DecodeStripe(body []byte) (Event, error) {
	var env stripeEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if env.ID == "" || env.Type == "" || env.Created <= 0 || len(env.Data.Object) == 0 {
		return Event{}, fmt.Errorf("%w: missing id, type, created or data.object", ErrBadPayload)
	}
	if env.Object != "" && env.Object != "event" {
		return Event{}, fmt.Errorf("%w: object is %q, not event", ErrBadPayload, env.Object)
	}
	var obj stripeObject
	if err := json.Unmarshal(env.Data.Object, &obj); err != nil {
		return Event{}, fmt.Errorf("%w: data.object: %v", ErrBadPayload, err)
	}
	// Guard the multiplication in StripeVersion: no real event is created after year 9999.
	if env.Created > 253402300799 {
		return Event{}, fmt.Errorf("%w: created out of range", ErrBadPayload)
	}
	ev := Event{
		Provider:      ProviderStripe,
		ID:            env.ID,
		Type:          env.Type,
		ObjectType:    obj.Object,
		ObjectID:      obj.ID,
		ObjectVersion: StripeVersion(env.Created, env.Type),
		Created:       time.Unix(env.Created, 0).UTC(),
		Raw:           json.RawMessage(body),
	}
	switch obj.Object {
	case "payment_intent":
		var pi stripePI
		if err := json.Unmarshal(env.Data.Object, &pi); err != nil {
			return Event{}, fmt.Errorf("%w: payment_intent: %v", ErrBadPayload, err)
		}
		pi.PaymentIntent.Customer = string(pi.Customer)
		pi.PaymentIntent.LatestCharge = capRef(pi.LatestCharge)
		ev.PaymentIntent = &pi.PaymentIntent
	case "charge":
		var ch stripeCharge
		if err := json.Unmarshal(env.Data.Object, &ch); err != nil {
			return Event{}, fmt.Errorf("%w: charge: %v", ErrBadPayload, err)
		}
		ch.Charge.PaymentIntentID = string(ch.PaymentIntent)
		ev.Charge = &ch.Charge
		if ch.Charge.PaymentIntentID != "" {
			ev.PaymentIntent = &PaymentIntent{
				ID: ch.Charge.PaymentIntentID, Amount: ch.Amount, Currency: ch.Currency,
				Customer: string(ch.Customer), Metadata: ch.Metadata, LatestCharge: capRef(expandable(ch.Charge.ID)),
			}
			if env.Type == provider.EventChargeRefunded {
				ev.ObjectType, ev.ObjectID = "payment_intent", ch.Charge.PaymentIntentID
			}
		}
	case "refund":
		var rf struct {
			Refund
			Charge        expandable `json:"charge"`
			PaymentIntent expandable `json:"payment_intent"`
			Reason        *string    `json:"reason"`
			FailureReason *string    `json:"failure_reason"`
		}
		if err := json.Unmarshal(env.Data.Object, &rf); err != nil {
			return Event{}, fmt.Errorf("%w: refund: %v", ErrBadPayload, err)
		}
		r := rf.Refund
		r.ChargeID, r.PaymentIntentID = capRef(rf.Charge), capRef(rf.PaymentIntent)
		if rf.Reason != nil {
			r.Reason = capRef(expandable(*rf.Reason))
		}
		if rf.FailureReason != nil {
			r.FailureReason = capRef(expandable(*rf.FailureReason))
		}
		ev.Refund = &r
	case "dispute":
		var dp struct {
			Dispute
			Charge          expandable `json:"charge"`
			PaymentIntent   expandable `json:"payment_intent"`
			EvidenceDetails *struct {
				DueBy int64 `json:"due_by"`
			} `json:"evidence_details"`
		}
		if err := json.Unmarshal(env.Data.Object, &dp); err != nil {
			return Event{}, fmt.Errorf("%w: dispute: %v", ErrBadPayload, err)
		}
		d := dp.Dispute
		d.ChargeID, d.PaymentIntentID = string(dp.Charge), string(dp.PaymentIntent)
		if dp.EvidenceDetails != nil && dp.EvidenceDetails.DueBy > 0 && dp.EvidenceDetails.DueBy <= 253402300799 {
			d.EvidenceDueBy = dp.EvidenceDetails.DueBy
		}
		ev.Dispute = &d
		if d.PaymentIntentID != "" {
			ev.ObjectType, ev.ObjectID = "payment_intent", d.PaymentIntentID
			ev.PaymentIntent = &PaymentIntent{ID: d.PaymentIntentID, Amount: d.Amount, Currency: d.Currency}
		}
	}
	if ev.ObjectID == "" {
		return Event{}, fmt.Errorf("%w: data.object has no id", ErrBadPayload)
	}
	if err := decodeSteer(&ev, env); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// decodeSteer reads what a steering event says; other events are left alone.
func decodeSteer(ev *Event, env stripeEnvelope) error {
	want := map[string]string{provider.EventPaymentMethodAttached: "payment_method", provider.EventPaymentMethodAutomaticUpdated: "payment_method",
		provider.EventCustomerUpdated: "customer", provider.EventInvoicePaid: "invoice"}[ev.Type]
	if want == "" {
		return nil
	}
	if ev.ObjectType != want {
		return fmt.Errorf("%w: %s carries a %q, not a %s", ErrBadPayload, ev.Type, ev.ObjectType, want)
	}
	var o stripeSteerObject
	if err := json.Unmarshal(env.Data.Object, &o); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadPayload, want, err)
	}
	id := capRef(expandable(ev.ObjectID))
	switch ev.Type {
	case provider.EventPaymentMethodAttached, provider.EventPaymentMethodAutomaticUpdated:
		if o.Customer != "" {
			ev.Steer = &Steer{Customer: capRef(o.Customer), PaymentMethod: id}
		}
	case provider.EventCustomerUpdated:
		// Only a change of the default payment method steers: previous_attributes names what
		// changed.
		var prev stripeSteerObject
		if len(env.Data.PreviousAttributes) > 0 {
			_ = json.Unmarshal(env.Data.PreviousAttributes, &prev)
		}
		if prev.InvoiceSettings != nil && o.InvoiceSettings != nil && o.InvoiceSettings.DefaultPaymentMethod != "" &&
			o.InvoiceSettings.DefaultPaymentMethod != prev.InvoiceSettings.DefaultPaymentMethod {
			ev.Steer = &Steer{Customer: id, PaymentMethod: capRef(o.InvoiceSettings.DefaultPaymentMethod)}
		}
	case provider.EventInvoicePaid:
		ev.Steer = &Steer{Customer: capRef(o.Customer), Invoice: id}
	}
	return nil
}

type standardPayload struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

type standardData struct {
	ID      any    `json:"id"`
	Object  string `json:"object"`
	Version *int64 `json:"version"`
}

// DecodeStandard decodes a Standard Webhooks payload {"type","timestamp","data"}; id is the
// webhook-id header, the spec's idempotency key. The spec defines no object identity or
// version, so: ObjectID is data.id when it is a string (else the event id, so ordering is per
// event), and ObjectVersion is data.version when the sender provides an integer one, else the
// payload timestamp in milliseconds.
func DecodeStandard(id string, body []byte) (Event, error) {
	var p standardPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if id == "" || p.Type == "" || p.Timestamp.IsZero() {
		return Event{}, fmt.Errorf("%w: missing webhook-id, type or timestamp", ErrBadPayload)
	}
	ev := Event{
		Provider:      ProviderStandard,
		ID:            id,
		Type:          p.Type,
		ObjectID:      id,
		ObjectVersion: p.Timestamp.UnixMilli(),
		Created:       p.Timestamp.UTC(),
		Raw:           json.RawMessage(body),
	}
	if len(p.Data) > 0 && p.Data[0] == '{' {
		var d standardData
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return Event{}, fmt.Errorf("%w: data: %v", ErrBadPayload, err)
		}
		if s, ok := d.ID.(string); ok && s != "" {
			ev.ObjectID = s
		}
		ev.ObjectType = d.Object
		if d.Version != nil {
			ev.ObjectVersion = *d.Version
		}
	}
	return ev, nil
}
