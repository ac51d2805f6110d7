package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// RefundEventTypes are the Stripe events whose object is a refund. They move the refund on the
// payment's refund ledger (payments.UpdateRefunds): found by the provider's id or by our
// twice_refund_id metadata, or adopted when made elsewhere, and only ever forward along its
// lifecycle, so a duplicated or reordered event changes nothing.
var RefundEventTypes = []string{provider.EventRefundCreated, provider.EventRefundUpdated, provider.EventRefundFailed, provider.EventChargeRefundUpdated}

// errDuplicate carries a dedupe record's failed condition out of a refund commit.
var errDuplicate = errors.New("worker: duplicate refund event")

// applyRefund applies an event about one refund: the dedupe records, the ledger, the payment's
// amount refunded and status, and a failed refund's dead-letter message, in one transaction.
// source ("webhook", "reconciliation") names where the report came from in the dead-letter
// record a failed refund opens.
func (w *Worker) applyRefund(ctx context.Context, ev webhooks.Event, dedupe []store.Write, now time.Time, source string) (Outcome, error) {
	r := ev.Refund
	id := r.Metadata[payments.MetaPaymentID]
	if id == "" && r.PaymentIntentID != "" {
		var err error
		id, err = payments.ByProviderID(ctx, w.Store, r.PaymentIntentID)
		if err != nil && !errors.Is(err, payments.ErrNotFound) {
			return "", err
		}
	}
	if id == "" {
		return w.recordOnly(ctx, ev, dedupe, "refund of a payment not made through twice; recorded only")
	}
	p, err := payments.Get(ctx, w.Store, id)
	switch {
	case errors.Is(err, payments.ErrNotFound):
		// A refund follows a success: the payment's own record must come first.
		return "", fmt.Errorf("%w: %s", ErrPaymentNotYet, id)
	case err != nil:
		return "", err
	}
	if p.ProviderPaymentID != "" && r.PaymentIntentID != "" && p.ProviderPaymentID != r.PaymentIntentID {
		return w.recordOnly(ctx, ev, dedupe, "refund of another provider payment than ours; recorded only")
	}
	report := provider.Refund{ID: r.ID, Payment: r.PaymentIntentID, Amount: r.Amount, Currency: r.Currency,
		Status: provider.RefundStatus(r.Status), Reason: provider.RefundReason(r.Reason), FailureReason: r.FailureReason,
		Metadata: r.Metadata}
	if r.Created > 0 {
		report.Created = time.Unix(r.Created, 0).UTC()
	}
	changed := false
	pay, led, err := payments.UpdateRefunds(ctx, w.Store, payments.RefundUpdate{PaymentID: id, Now: now, Source: source, EventID: ev.ID,
		Commit: func(ctx context.Context, ws []store.Write) error {
			err := w.Store.Transact(ctx, append(ws, dedupe...)...)
			var ce *store.ConditionError
			if errors.As(err, &ce) && ce.Index >= len(ws) {
				return fmt.Errorf("%w (write %d)", errDuplicate, ce.Index-len(ws))
			}
			return err
		}}, func(_ *payments.Payment, l *payments.RefundLedger) error {
		changed = l.Report(report, now)
		if !changed {
			return payments.ErrNoChange
		}
		return nil
	})
	switch {
	case errors.Is(err, errDuplicate):
		w.log().InfoContext(ctx, "webhook event deduped", "event_id", ev.ID, "type", ev.Type)
		return Duplicate, nil
	case err != nil:
		return "", err
	case !changed:
		// The refund is already there or further along: keep the event's ids, change nothing.
		if err := w.Store.Transact(ctx, dedupe...); errors.Is(err, store.ErrConditionFailed) {
			return Duplicate, nil
		} else if err != nil {
			return "", err
		}
		w.log().InfoContext(ctx, "refund event older than the refund's state; ignored", "event_id", ev.ID, "type", ev.Type,
			"payment_id", id, "refund", r.ID, "status", r.Status)
		return Stale, nil
	}
	w.log().InfoContext(ctx, "webhook event applied", "event_id", ev.ID, "type", ev.Type, "payment_id", pay.ID,
		"refund", r.ID, "refund_status", r.Status, "amount_refunded", led.Refunded(), "status", pay.Status)
	return Applied, nil
}

// SettleRefund applies the provider's current view of one refund through the same path as a
// refund event (refund.updated, created now, under eventID: a deterministic id of the
// caller's, so settling twice is a duplicate): found on the payment's ledger by the provider's
// id or our twice_refund_id metadata, or adopted when made elsewhere, moved only forward. A
// refund it records as failed opens its dead-letter record with source "reconciliation". An
// outcome other than Applied means it changed nothing.
func (w *Worker) SettleRefund(ctx context.Context, r provider.Refund, eventID string) (Outcome, error) {
	if r.ID == "" || r.Payment == "" || eventID == "" {
		return "", fmt.Errorf("worker: nothing to settle for refund %q of %q: %w", r.ID, r.Payment, webhooks.ErrBadPayload)
	}
	now := w.now().UTC()
	const typ = provider.EventRefundUpdated
	ref := &webhooks.Refund{ID: r.ID, Amount: r.Amount, Currency: r.Currency, PaymentIntentID: r.Payment, Status: string(r.Status),
		Reason: string(r.Reason), FailureReason: r.FailureReason, Metadata: r.Metadata}
	if !r.Created.IsZero() {
		ref.Created = r.Created.Unix()
	}
	ev := webhooks.Event{Provider: webhooks.ProviderStripe, ID: eventID, Type: typ, ObjectType: "refund", ObjectID: r.ID,
		ObjectVersion: webhooks.StripeVersion(now.Unix(), typ), Created: now, Refund: ref}
	return w.applyRefund(ctx, ev, w.dedupeWrites(ev, now), now, "reconciliation")
}

// recordOnly keeps an event's dedupe records and changes nothing.
func (w *Worker) recordOnly(ctx context.Context, ev webhooks.Event, dedupe []store.Write, why string) (Outcome, error) {
	if err := w.Store.Transact(ctx, dedupe...); errors.Is(err, store.ErrConditionFailed) {
		return Duplicate, nil
	} else if err != nil {
		return "", err
	}
	w.log().InfoContext(ctx, why, "event_id", ev.ID, "type", ev.Type)
	return Recorded, nil
}

// refundsDecide reports whether the payment's refund ledger holds refunds: then the charge's
// cumulative amount_refunded (charge.refunded) is not applied, because it cannot be ordered
// against a refund that failed later, and the refunds themselves decide.
func (w *Worker) refundsDecide(ctx context.Context, paymentID string) (bool, error) {
	l, err := payments.GetRefunds(ctx, w.Store, paymentID)
	return len(l.Refunds) > 0, err
}
