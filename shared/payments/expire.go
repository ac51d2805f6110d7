package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// Auto-cancel: a payment left in requires_action past the customer window
// (Bounds.CustomerWindow) is canceled at the provider, so no authentication the customer
// completes days later charges them for an order the merchant gave up on. Reconciliation is
// the timer: finding such a payment, it commits AutoCancelMessage with its own record of the
// finding. The outbox relay hands the job to the resolve queue (the relay holds no provider
// key), and the payment resolver cancels under provider.AutoCancelKey, so every repeat sends
// the same key, and records the canceled payment (cancellation_reason abandoned).

// KindAutoCancel is the outbox kind of an auto-cancel (payload ResolveJob with Cancel set).
const KindAutoCancel = "auto_cancel"

// ReasonCustomerWindow is the auto-cancel reason of a payment that waited for its customer
// longer than the customer window.
const ReasonCustomerWindow = "customer_window"

// AutoCancelMessage is the outbox write that cancels p for reason, for the transaction that
// records why. Its id is one per payment and reason, as the provider key is.
func AutoCancelMessage(p Payment, reason string, now time.Time) (store.Write, error) {
	return outbox.New(KindAutoCancel, "autocancel#"+p.ID+"#"+reason,
		ResolveJob{Scope: p.Scope, Key: p.IdempotencyKey, PaymentID: p.ID, Cancel: reason}, now)
}

// AutoCancel cancels a payment still waiting for its customer, at the provider and here. A
// payment that moved on meanwhile (the customer authenticated, an event came) is left alone:
// the provider refuses the cancel as the wrong state, and its current view is recorded
// instead. An error (the provider unreachable, a commit failed) is the job's: the queue
// repeats it with the same key.
func (s *Service) AutoCancel(ctx context.Context, paymentID, reason string) error {
	p, err := Get(ctx, s.Store, paymentID)
	if err != nil {
		return err
	}
	if p.Status != provider.StatusRequiresAction || p.ProviderPaymentID == "" {
		s.log().InfoContext(ctx, "auto-cancel: the payment no longer waits for its customer", "payment_id", p.ID, "status", p.Status)
		return nil
	}
	ops, ok := s.Provider.(provider.Operations)
	if !ok {
		return provider.ErrOperationsUnsupported
	}
	pp, err := ops.Cancel(ctx, provider.CancelRequest{ID: p.ProviderPaymentID, Reason: provider.CancelAbandoned,
		IdempotencyKey: provider.AutoCancelKey(p.ID, reason)})
	if errors.Is(err, provider.ErrUnexpectedState) {
		pp, err = s.Provider.Get(ctx, p.ProviderPaymentID)
	}
	if err != nil {
		return fmt.Errorf("payments: auto-cancel %s: %w", p.ID, err)
	}
	p.Observe(pp, s.Classify, s.now())
	w, err := p.Put()
	if err != nil {
		return err
	}
	cw, err := ChangeMessage(p, s.now())
	if err != nil {
		return err
	}
	ws := []store.Write{w, cw}
	if p.Status == provider.StatusDeclined {
		rw, err := RecoveryMessage(p.ID, s.now())
		if err != nil {
			return err
		}
		ws = append(ws, rw)
	}
	err = s.Store.Transact(ctx, ws...)
	if errors.Is(err, store.ErrConditionFailed) {
		err = nil // a newer state was stored meanwhile: it stands
	}
	if err == nil {
		s.log().InfoContext(ctx, "payment auto-canceled: the customer did not act within the window", "payment_id", p.ID,
			"reason", reason, "status", p.Status)
	}
	return err
}
