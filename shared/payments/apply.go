package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Applying what the provider says, in one place. An observation is a webhooks.Event: a
// webhook delivery decoded (the webhook worker), an event of the provider's log (the
// backfill), or the provider's current view of a payment or a refund read by reconciliation
// (Settle, SettleRefund: the event that would report that state). Applier.Apply takes each
// through the same steps:
//   - dedupe on the event id and on the change (object, type, version), in EventsTable;
//   - the write set (writes): the payment's new state under the ordering guard (its version,
//     from the one order table: provider.EventRank), its change on the event feed, its
//     aliases, and the follow-on work the state requires (a recovery start, a dispute's
//     dead-letter message, a replan or the steering of running recoveries);
//   - one transaction for the dedupe records and the write set, whose failed condition says
//     what the observation was (Outcome).
// A refund object's events take the refund ledger's path instead (applyRefund).

// EventsTable holds one dedupe record per applied event id and per change (object, type,
// version), and the backfill's checkpoint.
const EventsTable = "webhook_events"

// DefaultEventRetention outlasts Stripe's retry horizon (3 days automatic, 30 days of manual
// resends).
const DefaultEventRetention = 30 * 24 * time.Hour

// Effect says what applying an observation did.
type Effect string

const (
	Applied   Effect = "applied"   // the payment moved to the event's state
	Duplicate Effect = "duplicate" // this event, or another event for the same change, was seen
	Stale     Effect = "stale"     // the payment already holds a newer version
	Recorded  Effect = "recorded"  // deduped and kept, but it changes no payment of ours
)

// ErrPaymentNotYet means the event names a payment of ours that is not stored yet (the API's
// commit may still be in flight); the caller tries again later.
var ErrPaymentNotYet = errors.New("payments: payment not stored yet")

// Applier applies the provider's observations of our payments exactly once and in order.
// Store is required; Steer and Replan are package recovery's SteerMessages and ReplanMessages
// (recovery imports payments, so they are handed in): an event that needs one of them and
// finds it nil fails, rather than leave a recovery unsteered.
type Applier struct {
	Store store.Store
	// Classify names a decline's class for the payment record.
	Classify func(provider.Decline) string
	// Steer returns the writes that steer the running recoveries a customer-side event
	// concerns (a new payment method, an invoice paid elsewhere).
	Steer func(ctx context.Context, st store.Store, s webhooks.Steer, now time.Time) ([]store.Write, error)
	// Replan returns the writes that make a running recovery plan again, when a decline
	// changed class.
	Replan func(ctx context.Context, st store.Store, paymentID string, now time.Time) ([]store.Write, error)
	// Retention is how long dedupe records are kept (default DefaultEventRetention).
	Retention time.Duration
	Now       func() time.Time
	Log       *slog.Logger
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Applier) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

// Apply applies one event. An error (a payment not stored yet, ErrPaymentNotYet; a failed
// commit) changes nothing, and the caller tries again.
func (a *Applier) Apply(ctx context.Context, ev webhooks.Event) (Effect, error) {
	return a.apply(ctx, ev, deadletter.SourceWebhook)
}

// dedupeWrites are the two dedupe records of ev (its event id, its change), committed with
// what it changes.
func (a *Applier) dedupeWrites(ev webhooks.Event, now time.Time) []store.Write {
	retention := a.Retention
	if retention == 0 {
		retention = DefaultEventRetention
	}
	expires := now.Add(retention).Unix()
	doc, _ := json.Marshal(map[string]any{"type": ev.Type, "object_id": ev.ObjectID, "version": ev.ObjectVersion, "applied_at": now.UTC()})
	return []store.Write{
		{Table: EventsTable, Put: &store.Item{PK: "event#" + webhooks.EventKey(ev), Doc: doc, ExpiresAt: expires}, Cond: store.Cond{Kind: store.NotExists}},
		{Table: EventsTable, Put: &store.Item{PK: "change#" + webhooks.ChangeKey(ev), Doc: doc, ExpiresAt: expires}, Cond: store.Cond{Kind: store.NotExists}},
	}
}

// apply applies one event from source: the dedupe records and the write set in one
// transaction.
func (a *Applier) apply(ctx context.Context, ev webhooks.Event, source deadletter.Source) (Effect, error) {
	now := a.now()
	dedupe := a.dedupeWrites(ev, now)
	if ev.ID == "" {
		return "", fmt.Errorf("payments: %s event without an id: %w", ev.Provider, webhooks.ErrBadPayload)
	}
	if ev.Refund != nil {
		return a.applyRefund(ctx, ev, dedupe, now, source)
	}
	pay, ws, err := a.writes(ctx, ev, now)
	if err != nil {
		return "", err
	}
	err = a.Store.Transact(ctx, append(dedupe, ws...)...)
	var ce *store.ConditionError
	switch {
	case err == nil && pay == nil:
		a.log().InfoContext(ctx, "webhook event recorded", "event_id", ev.ID, "type", ev.Type)
		return Recorded, nil
	case err == nil:
		a.log().InfoContext(ctx, "webhook event applied", "event_id", ev.ID, "type", ev.Type, "payment_id", pay.ID, "status", pay.Status)
		return Applied, nil
	case !errors.As(err, &ce):
		return "", err
	case ce.Index == 0:
		a.log().InfoContext(ctx, "webhook event deduped", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	case ce.Index == 1:
		// Another event described the same change: keep this id too, so its own redeliveries
		// stop at the first check.
		if err := a.Store.Transact(ctx, dedupe[0]); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return "", err
		}
		a.log().InfoContext(ctx, "webhook event deduped by change", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	default:
		if err := a.Store.Transact(ctx, dedupe...); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return "", err
		}
		a.log().InfoContext(ctx, "webhook event older than the applied version; ignored", "event_id", ev.ID,
			"type", ev.Type, "payment_id", pay.ID, "version", ev.ObjectVersion)
		return Stale, nil
	}
}

// writes is the write set of ev at now: the payment's new state (nil when ev changes no
// payment of ours) and what to commit with it: the payment's put (conditioned on its version),
// its change message, its aliases, the recovery a decline starts, a dispute's follow-on, a
// replan when a decline changed class, and the steering of running recoveries.
func (a *Applier) writes(ctx context.Context, ev webhooks.Event, now time.Time) (*Payment, []store.Write, error) {
	pay, reclassified, err := a.paymentFor(ctx, ev, now)
	if err != nil {
		return nil, nil, err
	}
	var ws []store.Write
	if pay != nil {
		pw, err := pay.Put()
		if err != nil {
			return nil, nil, err
		}
		cw, err := ChangeMessage(*pay, now)
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, pw, cw)
		ws = append(ws, AliasWrites(*pay)...)
		if pay.Status == provider.StatusDeclined {
			// Recovery starts from the outbox, committed with the dedupe records and the state:
			// a failed start is retried by the relay, never lost behind a deduped redelivery.
			rw, err := RecoveryMessage(pay.ID, now)
			if err != nil {
				return nil, nil, err
			}
			ws = append(ws, rw)
		}
		fo, err := amendFollowOns(ev, pay, now)
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, fo...)
		if reclassified {
			// The running recovery plans for the old class: it plans again (or stops, for a
			// class that never retries), steered like a customer's event.
			if a.Replan == nil {
				return nil, nil, fmt.Errorf("payments: %s changed a decline's class, and the Applier has no Replan", ev.ID)
			}
			rws, err := a.Replan(ctx, a.Store, pay.ID, now)
			if err != nil {
				return nil, nil, err
			}
			ws = append(ws, rws...)
		}
	}
	if ev.Steer != nil {
		// A customer-side event steers running recoveries: each signal and the message that
		// ends its wait are committed with the dedupe records.
		if a.Steer == nil {
			return nil, nil, fmt.Errorf("payments: %s steers recoveries, and the Applier has no Steer", ev.ID)
		}
		sws, err := a.Steer(ctx, a.Store, *ev.Steer, now)
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, sws...)
	}
	return pay, ws, nil
}

// paymentFor builds the payment's state after ev, or nil when ev changes no payment of ours;
// reclassified says a declined payment's decline changed class.
func (a *Applier) paymentFor(ctx context.Context, ev webhooks.Event, now time.Time) (*Payment, bool, error) {
	if amends(ev) {
		p, err := a.amend(ctx, ev, now)
		return p, false, err
	}
	status, ok := eventStatus(ev)
	if !ok || ev.PaymentIntent == nil {
		return nil, false, nil
	}

	pi := ev.PaymentIntent
	id := pi.Metadata[MetaPaymentID]
	if id == "" {
		var err error
		id, err = ByProviderID(ctx, a.Store, pi.ID)
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil // not created through twice: reconciliation reports it
		}
		if err != nil {
			return nil, false, err
		}
	}
	p, err := Get(ctx, a.Store, id)
	switch {
	case errors.Is(err, ErrNotFound) && pi.Metadata[MetaScope] != "":
		// The API call reached the provider but its commit never happened (a crash): the
		// provider's event is the first we hear of the payment.
		p = Payment{ID: id, Scope: pi.Metadata[MetaScope], Amount: pi.Amount, Currency: pi.Currency,
			Customer: pi.Customer, Invoice: pi.Metadata[MetaInvoice], CreatedAt: ev.Created.UTC()}
	case errors.Is(err, ErrNotFound):
		return nil, false, fmt.Errorf("%w: %s", ErrPaymentNotYet, id)
	case err != nil:
		return nil, false, err
	}
	if p.ProviderPaymentID != "" && p.ProviderPaymentID != pi.ID {
		// Another provider payment names ours (a second charge for one payment): it must not
		// take our record over. Reconciliation reports the duplicate for a person.
		a.log().WarnContext(ctx, "event about another provider payment than ours; recorded only", "event_id", ev.ID,
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
	p.Transition(status, d, a.Classify, EventVersion(ev.ObjectVersion), now)
	reclassified := wasDeclined && status == provider.StatusDeclined && before != "" && p.DeclineClass != before
	switch status {
	case provider.StatusRequiresAction:
		if na := pi.NextAction; na != nil && na.Type != "" {
			p.NextAction = &NextAction{Type: capField(na.Type)}
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
			p.CancellationReason = capField(pi.CancellationReason)
		}
	}
	return &p, reclassified, nil
}

// eventStatus is the payment status ev reports (provider.EventStatus); a charge.refunded
// reports refunded only once the whole charge is refunded.
func eventStatus(ev webhooks.Event) (string, bool) {
	if ev.Type == provider.EventChargeRefunded && (ev.Charge == nil || !ev.Charge.Refunded) {
		return "", false
	}
	st, ok := provider.EventStatus(ev.Type)
	return string(st), ok
}

// Settle applies the provider's current view of a payment through the same path as an event:
// as the event that reports its state (provider.StatusEvent; a refund, whole or partial, as
// charge.refunded with the amount refunded), created now, under eventID (a deterministic id
// of the caller's: reconciliation uses its run and the difference, so settling twice is a
// duplicate). A payment waiting for its customer or for a capture has no settled state to
// record. An outcome other than Applied means it changed nothing.
func (a *Applier) Settle(ctx context.Context, p provider.Payment, eventID string) (Effect, error) {
	typ := provider.StatusEvent(p.Status)
	ok := typ != "" && p.Status != provider.StatusPending && p.Status != provider.StatusRequiresAction &&
		p.Status != provider.StatusRequiresCapture
	if p.Status == provider.StatusSucceeded && p.AmountRefunded > 0 {
		typ = provider.EventChargeRefunded
	}
	if !ok || p.ID == "" || eventID == "" {
		return "", fmt.Errorf("payments: nothing to settle for %s (%s): %w", p.ID, p.Status, webhooks.ErrBadPayload)
	}
	now := a.now().UTC()
	pi := &webhooks.PaymentIntent{ID: p.ID, Status: string(p.Status), Amount: p.Amount, Currency: p.Currency,
		Customer: p.Customer, Metadata: p.Metadata}
	if d := p.Decline; d != nil {
		pi.LastPaymentError = &webhooks.PaymentError{Code: d.ErrorCode, DeclineCode: d.Code, AdviceCode: d.AdviceCode,
			NetworkAdviceCode: d.NetworkAdviceCode, NetworkDeclineCode: d.NetworkDeclineCode}
	}
	ev := webhooks.Event{Provider: webhooks.ProviderStripe, ID: eventID, Type: typ, ObjectType: "payment_intent", ObjectID: p.ID,
		ObjectVersion: webhooks.StripeVersion(now.Unix(), typ), Created: now, PaymentIntent: pi}
	if typ == provider.EventChargeRefunded {
		refunded := p.AmountRefunded
		if p.Status == provider.StatusRefunded && refunded == 0 {
			refunded = p.Amount // refunded in full, by the provider's word
		}
		ev.Charge = &webhooks.Charge{PaymentIntentID: p.ID, Amount: p.Amount, AmountRefunded: refunded, Refunded: refunded >= p.Amount}
	}
	return a.apply(ctx, ev, deadletter.SourceReconciliation)
}

// recordOnly keeps an event's dedupe records and changes nothing.
func (a *Applier) recordOnly(ctx context.Context, ev webhooks.Event, dedupe []store.Write, why string) (Effect, error) {
	if err := a.Store.Transact(ctx, dedupe...); errors.Is(err, store.ErrConditionFailed) {
		return Duplicate, nil
	} else if err != nil {
		return "", err
	}
	a.log().InfoContext(ctx, why, "event_id", ev.ID, "type", ev.Type)
	return Recorded, nil
}

// StripeEventTypes are the Stripe event types Apply acts on: each reports a payment status
// (provider.EventStatus), amends a payment (a refund, a dispute), moves a refund on its
// ledger, or steers a running recovery (webhooks.Steer). Any other type is verified,
// deduplicated and recorded, and changes nothing. A Stripe webhook endpoint for twice enables
// exactly these; docs/deploy.md lists them and a test there fails when the two differ.
// TestStripeEventTypesAreApplied holds this list to the code.
var StripeEventTypes = []string{
	provider.EventPaymentIntentRequiresAction,
	provider.EventPaymentIntentCapturableUpdated,
	provider.EventPaymentIntentProcessing,
	provider.EventPaymentIntentSucceeded,
	provider.EventPaymentIntentPaymentFailed,
	provider.EventPaymentIntentCanceled,
	provider.EventChargeRefunded,
	provider.EventChargeRefundUpdated,
	provider.EventRefundCreated,
	provider.EventRefundUpdated,
	provider.EventRefundFailed,
	provider.EventDisputeCreated,
	provider.EventDisputeUpdated,
	provider.EventDisputeClosed,
	provider.EventPaymentMethodAttached,
	provider.EventPaymentMethodAutomaticUpdated,
	provider.EventCustomerUpdated,
	provider.EventInvoicePaid,
}
