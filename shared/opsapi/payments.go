package opsapi

import (
	"context"
	"errors"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// StorePayments reads payments from the payments table for the timeline (the local stack and
// the operator-api function wire it the same way).
type StorePayments struct{ Store store.Store }

var _ PaymentReader = StorePayments{}

// Payment implements PaymentReader.
func (s StorePayments) Payment(ctx context.Context, id string) (Payment, error) {
	p, err := payments.Get(ctx, s.Store, id)
	if errors.Is(err, payments.ErrNotFound) {
		return Payment{}, ErrNoPayment
	}
	if err != nil {
		return Payment{}, err
	}
	out := Payment{ID: p.ID, Status: p.Status, Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
		ProviderPaymentID: p.ProviderPaymentID, Invoice: p.Invoice, IdempotencyKey: p.IdempotencyKey, CreatedAt: p.CreatedAt,
		AmountRefunded: p.AmountRefunded, scope: p.Scope}
	if p.Card != nil {
		out.CardBrand, out.CardLast4 = p.Card.Brand, p.Card.Last4
	}
	if p.Dispute != nil {
		out.Dispute = p.Dispute.Status
	}
	if p.NextAction != nil {
		out.NextActionType = p.NextAction.Type
	}
	out.CaptureMethod, out.AmountCapturable = p.CaptureMethod, p.AmountCapturable
	if !p.CaptureBefore.IsZero() && p.Status == provider.StatusRequiresCapture {
		cb := p.CaptureBefore.UTC()
		out.CaptureBefore = &cb
	}
	led, err := payments.GetRefunds(ctx, s.Store, id)
	if err != nil {
		return Payment{}, err
	}
	if len(led.Refunds) > 0 {
		out.Refunds, out.refunds = led.RefundViews(), led.Refunds
	}
	return out, nil
}
