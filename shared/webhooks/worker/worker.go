package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Table holds one dedupe record per event id and per (object, type, version).
const Table = "webhook_events"

// DefaultRetention outlasts Stripe's retry horizon (3 days automatic, 30 days of manual resends).
const DefaultRetention = 30 * 24 * time.Hour

// Outcome says what applying a delivery did.
type Outcome string

const (
	Applied   Outcome = "applied"   // the payment moved to the event's state
	Duplicate Outcome = "duplicate" // this event, or another event for the same change, was seen
	Stale     Outcome = "stale"     // the payment already holds a newer version
	Recorded  Outcome = "recorded"  // deduped and kept, but it changes no payment of ours
)

// ErrPaymentNotYet means the event names a payment of ours that is not stored yet (the API's
// commit may still be in flight); the message is retried.
var ErrPaymentNotYet = errors.New("worker: payment not stored yet")

// Worker applies deliveries.
type Worker struct {
	Store store.Store
	// Classify names a decline's class for the payment record.
	Classify  func(provider.Decline) string
	Retention time.Duration
	Now       func() time.Time
	Log       *slog.Logger
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}

// Handle applies one message of the webhook queue, whose body is a JSON webhooks.Delivery: the
// per-message func that sqsbatch runs for the webhook-worker function. An error (a body that does
// not decode, a payment not stored yet, a failed commit) fails this message alone, so SQS
// delivers it again.
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	var d webhooks.Delivery
	if err := json.Unmarshal(m.Body, &d); err != nil {
		return fmt.Errorf("worker: delivery: %w", err)
	}
	_, err := w.Apply(ctx, d)
	return err
}

// Apply applies one delivery.
func (w *Worker) Apply(ctx context.Context, d webhooks.Delivery) (Outcome, error) {
	ev, err := webhooks.Decode(d)
	if err != nil {
		return "", err
	}
	return w.apply(ctx, ev)
}

// apply applies one decoded event (a delivery's, or the provider's object a reconciliation
// settles: Settle).
// dedupeWrites are the two dedupe records of ev (its event id, its change), committed with
// what it changes.
func (w *Worker) dedupeWrites(ev webhooks.Event, now time.Time) []store.Write {
	retention := w.Retention
	if retention == 0 {
		retention = DefaultRetention
	}
	expires := now.Add(retention).Unix()
	doc, _ := json.Marshal(map[string]any{"type": ev.Type, "object_id": ev.ObjectID, "version": ev.ObjectVersion, "applied_at": now.UTC()})
	return []store.Write{
		{Table: Table, Put: &store.Item{PK: "event#" + webhooks.EventKey(ev), Doc: doc, ExpiresAt: expires}, Cond: store.Cond{Kind: store.NotExists}},
		{Table: Table, Put: &store.Item{PK: "change#" + webhooks.ChangeKey(ev), Doc: doc, ExpiresAt: expires}, Cond: store.Cond{Kind: store.NotExists}},
	}
}

func (w *Worker) apply(ctx context.Context, ev webhooks.Event) (Outcome, error) {
	now := w.now()
	dedupe := w.dedupeWrites(ev, now)
	if ev.ID == "" {
		return "", fmt.Errorf("worker: %s event without an id: %w", ev.Provider, webhooks.ErrBadPayload)
	}

	if ev.Refund != nil {
		return w.applyRefund(ctx, ev, dedupe, now, "webhook")
	}
	pay, reclassified, err := w.paymentFor(ctx, ev, now)
	if err != nil {
		return "", err
	}
	ws := dedupe
	if pay != nil {
		pw, err := pay.Put()
		if err != nil {
			return "", err
		}
		cw, err := payments.ChangeMessage(*pay, now)
		if err != nil {
			return "", err
		}
		ws = append(ws, pw, cw)
		ws = append(ws, payments.AliasWrites(*pay)...)
		if pay.Status == provider.StatusDeclined {
			// Recovery starts from the outbox, committed with the dedupe records and the state:
			// a failed start is retried by the relay, never lost behind a deduped redelivery.
			rw, err := payments.RecoveryMessage(pay.ID, now)
			if err != nil {
				return "", err
			}
			ws = append(ws, rw)
		}
		fo, err := amendFollowOns(ev, pay, now)
		if err != nil {
			return "", err
		}
		ws = append(ws, fo...)
		if reclassified {
			// The running recovery plans for the old class: it plans again (or stops, for a
			// class that never retries), steered like a customer's event.
			rws, err := recovery.ReplanMessages(ctx, w.Store, pay.ID, now)
			if err != nil {
				return "", err
			}
			ws = append(ws, rws...)
		}
	}
	if ev.Steer != nil {
		// A customer-side event steers running recoveries: each signal and the message that
		// ends its wait are committed with the dedupe records.
		sws, err := recovery.SteerMessages(ctx, w.Store, *ev.Steer, now)
		if err != nil {
			return "", err
		}
		ws = append(ws, sws...)
	}
	err = w.Store.Transact(ctx, ws...)
	var ce *store.ConditionError
	switch {
	case err == nil && pay == nil:
		w.log().InfoContext(ctx, "webhook event recorded", "event_id", ev.ID, "type", ev.Type)
		return Recorded, nil
	case err == nil:
		w.log().InfoContext(ctx, "webhook event applied", "event_id", ev.ID, "type", ev.Type, "payment_id", pay.ID, "status", pay.Status)
		return Applied, nil
	case !errors.As(err, &ce):
		return "", err
	case ce.Index == 0:
		w.log().InfoContext(ctx, "webhook event deduped", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	case ce.Index == 1:
		// Another event described the same change: keep this id too, so its own redeliveries
		// stop at the first check.
		if err := w.Store.Transact(ctx, dedupe[0]); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return "", err
		}
		w.log().InfoContext(ctx, "webhook event deduped by change", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	default:
		if err := w.Store.Transact(ctx, dedupe...); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return "", err
		}
		w.log().InfoContext(ctx, "webhook event older than the applied version; ignored", "event_id", ev.ID,
			"type", ev.Type, "payment_id", pay.ID, "version", ev.ObjectVersion)
		return Stale, nil
	}
}

// paymentFor builds the payment's state after ev, or nil when ev changes no payment of ours;
// reclassified says a declined payment's decline changed class.
func (w *Worker) paymentFor(ctx context.Context, ev webhooks.Event, now time.Time) (*payments.Payment, bool, error) {
	if amends(ev) {
		p, err := w.amend(ctx, ev, now)
		return p, false, err
	}
	status, ok := statusOf(ev)
	if !ok || ev.PaymentIntent == nil {
		return nil, false, nil
	}

	pi := ev.PaymentIntent
	id := pi.Metadata[payments.MetaPaymentID]
	if id == "" {
		var err error
		id, err = payments.ByProviderID(ctx, w.Store, pi.ID)
		if errors.Is(err, payments.ErrNotFound) {
			return nil, false, nil // not created through twice: reconciliation reports it
		}
		if err != nil {
			return nil, false, err
		}
	}
	p, err := payments.Get(ctx, w.Store, id)
	switch {
	case errors.Is(err, payments.ErrNotFound) && pi.Metadata[payments.MetaScope] != "":
		// The API call reached the provider but its commit never happened (a crash): the
		// provider's event is the first we hear of the payment.
		p = payments.Payment{ID: id, Scope: pi.Metadata[payments.MetaScope], Amount: pi.Amount, Currency: pi.Currency,
			Customer: pi.Customer, Invoice: pi.Metadata[payments.MetaInvoice], CreatedAt: ev.Created.UTC()}
	case errors.Is(err, payments.ErrNotFound):
		return nil, false, fmt.Errorf("%w: %s", ErrPaymentNotYet, id)
	case err != nil:
		return nil, false, err
	}
	if p.ProviderPaymentID != "" && p.ProviderPaymentID != pi.ID {
		// Another provider payment names ours (a second charge for one payment): it must not
		// take our record over. Reconciliation reports the duplicate for a person.
		w.log().WarnContext(ctx, "event about another provider payment than ours; recorded only", "event_id", ev.ID,
			"payment_id", p.ID, "provider_payment_id", p.ProviderPaymentID, "event_provider_payment_id", pi.ID)
		return nil, false, nil
	}
	p.ProviderPaymentID = pi.ID
	if pi.LatestCharge != "" {
		p.LatestCharge = pi.LatestCharge
	}
	var d *provider.Decline
	if status == provider.StatusDeclined && pi.LastPaymentError != nil {
		e := pi.LastPaymentError
		code := e.DeclineCode
		if code == "" {
			code = e.Code
		}
		d = &provider.Decline{Code: code, ErrorCode: e.Code, AdviceCode: e.AdviceCode,
			NetworkAdviceCode: e.NetworkAdviceCode, NetworkDeclineCode: e.NetworkDeclineCode, Network: e.Brand()}
		// The declined card, so a recovery planned from this record counts the card's network
		// caps even when the event comes before the API's own record of the decline.
		p.SetCard(e.Card())
	}
	before := p.DeclineClass
	wasDeclined := p.Status == provider.StatusDeclined
	p.Transition(status, d, w.Classify, payments.EventVersion(ev.ObjectVersion), now)
	reclassified := wasDeclined && status == provider.StatusDeclined && before != "" && p.DeclineClass != before
	switch status {
	case provider.StatusRequiresAction:
		if na := pi.NextAction; na != nil && na.Type != "" {
			p.NextAction = &payments.NextAction{Type: capRef(na.Type)}
			if na.RedirectToURL != nil && len(na.RedirectToURL.URL) <= 2048 {
				p.NextAction.RedirectURL = na.RedirectToURL.URL
			}
		}
	case provider.StatusRequiresCapture:
		// The event says what may be captured; when the hold lapses only the provider's
		// charge says (the create's answer and a reconciliation read it).
		p.AmountCapturable = pi.AmountCapturable
	case provider.StatusCanceled:
		if pi.CancellationReason != "" {
			p.CancellationReason = capRef(pi.CancellationReason)
		}
	}
	return &p, reclassified, nil
}

// capRef caps a provider's word before it is stored.
func capRef(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// statusOf maps an event to the payment status it reports (provider.EventStatus); a
// charge.refunded reports refunded only once the whole charge is refunded.
func statusOf(ev webhooks.Event) (string, bool) {
	if ev.Type == provider.EventChargeRefunded && (ev.Charge == nil || !ev.Charge.Refunded) {
		return "", false
	}
	st, ok := provider.EventStatus(ev.Type)
	return string(st), ok
}
