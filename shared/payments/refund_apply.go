package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Applying a refund object's events (provider.EventRefundCreated, EventRefundUpdated,
// EventRefundFailed, EventChargeRefundUpdated): they move the refund on the payment's refund
// ledger (UpdateRefunds), found by the provider's id or by our twice_refund_id metadata, or
// adopted when made elsewhere, and only ever forward along its lifecycle
// (provider.RefundRank), so a duplicated or reordered event changes nothing.

// errDuplicate carries a dedupe record's failed condition out of a refund commit.
var errDuplicate = errors.New("payments: duplicate refund event")

// applyRefund applies an event about one refund: the dedupe records, the ledger, the payment's
// amount refunded and status, and a failed refund's dead-letter message, in one transaction.
// source names where the report came from in the dead-letter record a failed refund opens.
func (a *Applier) applyRefund(ctx context.Context, ev webhooks.Event, dedupe []store.Write, now time.Time, source deadletter.Source) (Effect, error) {
	r := ev.Refund
	id := r.Metadata[MetaPaymentID]
	if id == "" && r.PaymentIntentID != "" {
		var err error
		id, err = ByProviderID(ctx, a.Store, r.PaymentIntentID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return "", err
		}
	}
	if id == "" {
		return a.recordOnly(ctx, ev, dedupe, "refund of a payment not made through twice; recorded only")
	}
	p, err := Get(ctx, a.Store, id)
	switch {
	case errors.Is(err, ErrNotFound):
		// A refund follows a success: the payment's own record must come first.
		return "", fmt.Errorf("%w: %s", ErrPaymentNotYet, id)
	case err != nil:
		return "", err
	}
	if p.ProviderPaymentID != "" && r.PaymentIntentID != "" && p.ProviderPaymentID != r.PaymentIntentID {
		return a.recordOnly(ctx, ev, dedupe, "refund of another provider payment than ours; recorded only")
	}
	report := provider.Refund{ID: r.ID, Payment: r.PaymentIntentID, Amount: r.Amount, Currency: r.Currency,
		Status: provider.RefundStatus(r.Status), Reason: provider.RefundReason(r.Reason), FailureReason: r.FailureReason,
		Metadata: r.Metadata}
	if r.Created > 0 {
		report.Created = time.Unix(r.Created, 0).UTC()
	}
	changed := false
	pay, led, err := UpdateRefunds(ctx, a.Store, RefundUpdate{PaymentID: id, Now: now, Source: string(source), EventID: ev.ID,
		Commit: func(ctx context.Context, ws []store.Write) error {
			err := a.Store.Transact(ctx, append(ws, dedupe...)...)
			var ce *store.ConditionError
			if errors.As(err, &ce) && ce.Index >= len(ws) {
				return fmt.Errorf("%w (write %d)", errDuplicate, ce.Index-len(ws))
			}
			return err
		}}, func(_ *Payment, l *RefundLedger) error {
		changed = l.Report(report, now)
		if !changed {
			return ErrNoChange
		}
		return nil
	})
	switch {
	case errors.Is(err, errDuplicate):
		a.log().InfoContext(ctx, "webhook event deduped", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	case err != nil:
		return "", err
	case !changed:
		// The refund is already there or further along: keep the event's ids, change nothing.
		if err := a.Store.Transact(ctx, dedupe...); errors.Is(err, store.ErrConditionFailed) {
			return Duplicate, nil
		} else if err != nil {
			return "", err
		}
		a.log().InfoContext(ctx, "refund event older than the refund's state; ignored", "event_id", ev.ID, "type", ev.Type,
			"payment_id", id, "refund", r.ID, "status", r.Status)
		return Stale, nil
	}
	a.log().InfoContext(ctx, "webhook event applied", "event_id", ev.ID, "type", ev.Type, "payment_id", pay.ID,
		"refund", r.ID, "refund_status", r.Status, "amount_refunded", led.Refunded(), "status", pay.Status)
	return Applied, nil
}

// SettleRefund applies the provider's current view of one refund through the same path as a
// refund event (refund.updated, created now, under eventID: a deterministic id of the
// caller's, so settling twice is a duplicate): found on the payment's ledger by the provider's
// id or our twice_refund_id metadata, or adopted when made elsewhere, moved only forward. A
// refund it records as failed opens its dead-letter record with source reconciliation. An
// outcome other than Applied means it changed nothing.
func (a *Applier) SettleRefund(ctx context.Context, r provider.Refund, eventID string) (Effect, error) {
	if r.ID == "" || r.Payment == "" || eventID == "" {
		return "", fmt.Errorf("payments: nothing to settle for refund %q of %q: %w", r.ID, r.Payment, webhooks.ErrBadPayload)
	}
	now := a.now().UTC()
	const typ = provider.EventRefundUpdated
	ref := &webhooks.Refund{ID: r.ID, Amount: r.Amount, Currency: r.Currency, PaymentIntentID: r.Payment, Status: string(r.Status),
		Reason: string(r.Reason), FailureReason: r.FailureReason, Metadata: r.Metadata}
	if !r.Created.IsZero() {
		ref.Created = r.Created.Unix()
	}
	ev := webhooks.Event{Provider: webhooks.ProviderStripe, ID: eventID, Type: typ, ObjectType: "refund", ObjectID: r.ID,
		ObjectVersion: webhooks.StripeVersion(now.Unix(), typ), Created: now, Refund: ref}
	return a.applyRefund(ctx, ev, a.dedupeWrites(ev, now), now, deadletter.SourceReconciliation)
}

// refundsDecide reports whether the payment's refund ledger holds refunds: then the charge's
// cumulative amount_refunded (charge.refunded) is not applied, because it cannot be ordered
// against a refund that failed later, and the refunds themselves decide.
func (a *Applier) refundsDecide(ctx context.Context, paymentID string) (bool, error) {
	l, err := GetRefunds(ctx, a.Store, paymentID)
	return len(l.Refunds) > 0, err
}
