package providertest

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// unexpectedState is the provider's answer to a call the payment's state does not allow.
func unexpectedState(op string, p provider.Payment) error {
	return &provider.PermanentError{Op: op, StatusCode: 400, Code: "payment_intent_unexpected_state",
		Err: fmt.Errorf("providertest: payment %s is %s", p.ID, p.Status)}
}

func notFound(op string) error {
	return &provider.PermanentError{Op: op, StatusCode: 404, Code: "resource_missing", Err: provider.ErrNotFound}
}

// write runs one keyed write the way Create does: faults first, then the key (a repeat
// replays the saved answer, another request under the key is a mismatch), then the effect.
func (f *Fake) write(op, key, request string, effect func() savedAnswer) savedAnswer {
	if key == "" {
		return savedAnswer{err: provider.ErrMissingIdempotencyKey}
	}
	f.init()
	f.calls++
	fl, failing := f.popFault()
	if failing && !fl.afterEffect {
		return savedAnswer{err: fl.err}
	}
	var out savedAnswer
	if k, ok := f.keys[key]; ok && f.now().Sub(k.at) < f.KeyHorizon() {
		switch {
		case k.request != request:
			out = savedAnswer{err: &provider.PermanentError{Op: op, StatusCode: 400, Code: "idempotency_error"}}
		case k.saved != nil:
			out = *k.saved
		default:
			out = savedAnswer{err: &provider.PermanentError{Op: op, StatusCode: 400, Code: "idempotency_error"}}
		}
	} else {
		out = effect()
		f.keys[key] = keyed{request: request, at: f.now(), saved: &out}
	}
	if failing {
		return savedAnswer{err: fl.err}
	}
	return out
}

// Capture implements provider.Operations.
func (f *Fake) Capture(_ context.Context, req provider.CaptureRequest) (provider.Payment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.write("capture", req.IdempotencyKey, fmt.Sprintf("capture %+v", req), func() savedAnswer {
		p, ok := f.payments[req.ID]
		switch {
		case !ok:
			return savedAnswer{err: notFound("capture")}
		case p.Status != provider.StatusRequiresCapture:
			return savedAnswer{err: unexpectedState("capture", p)}
		case req.AmountToCapture > p.AmountCapturable:
			return savedAnswer{err: &provider.PermanentError{Op: "capture", StatusCode: 400, Code: "amount_too_large",
				Err: fmt.Errorf("providertest: %d is more than the capturable %d", req.AmountToCapture, p.AmountCapturable)}}
		}
		amount := req.AmountToCapture
		if amount == 0 {
			amount = p.AmountCapturable
		}
		// The rest of the hold is released, not refunded.
		p.Status, p.AmountReceived, p.AmountCapturable, p.CaptureBefore = provider.StatusSucceeded, amount, 0, time.Time{}
		f.payments[p.ID] = p
		return savedAnswer{payment: p}
	})
	return a.payment, a.err
}

// Cancel implements provider.Operations: a payment that has not succeeded (nor been
// canceled) is canceled, and a hold released.
func (f *Fake) Cancel(_ context.Context, req provider.CancelRequest) (provider.Payment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.write("cancel", req.IdempotencyKey, fmt.Sprintf("cancel %+v", req), func() savedAnswer {
		p, ok := f.payments[req.ID]
		switch {
		case !ok:
			return savedAnswer{err: notFound("cancel")}
		case p.Status == provider.StatusSucceeded || p.Status == provider.StatusRefunded || p.Status == provider.StatusCanceled:
			return savedAnswer{err: unexpectedState("cancel", p)}
		}
		p.Status, p.CancellationReason = provider.StatusCanceled, string(req.Reason)
		p.AmountCapturable, p.CaptureBefore, p.NextAction, p.ClientSecret = 0, time.Time{}, nil, ""
		f.payments[p.ID] = p
		return savedAnswer{payment: p}
	})
	return a.payment, a.err
}

// Refund implements provider.Operations. A refund of a PMRefundFail payment is accepted as
// succeeded and fails at the next read of the payment or its refunds.
func (f *Fake) Refund(_ context.Context, req provider.RefundRequest) (provider.Refund, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.write("refund", req.IdempotencyKey, fmt.Sprintf("refund %+v", req), func() savedAnswer {
		p, ok := f.payments[req.Payment]
		if !ok {
			return savedAnswer{err: notFound("refund")}
		}
		if p.Status != provider.StatusSucceeded && p.Status != provider.StatusRefunded {
			return savedAnswer{err: &provider.PermanentError{Op: "refund", StatusCode: 400, Code: "charge_not_refundable",
				Err: fmt.Errorf("providertest: payment %s is %s", p.ID, p.Status)}}
		}
		remaining := p.AmountReceived - p.AmountRefunded
		amount := req.Amount
		if amount == 0 {
			amount = remaining
		}
		switch {
		case remaining <= 0:
			return savedAnswer{err: &provider.PermanentError{Op: "refund", StatusCode: 400, Code: "charge_already_refunded",
				Err: fmt.Errorf("providertest: payment %s is refunded", p.ID)}}
		case amount > remaining:
			return savedAnswer{err: &provider.PermanentError{Op: "refund", StatusCode: 400, Code: "amount_too_large",
				Err: fmt.Errorf("providertest: refund %d is more than the unrefunded %d", amount, remaining)}}
		}
		r := provider.Refund{ID: fmt.Sprintf("re_fake_%d", len(f.refunds)+1), Payment: p.ID, Amount: amount, Currency: p.Currency,
			Status: provider.RefundSucceeded, Reason: req.Reason, Created: f.now().UTC().Truncate(time.Second),
			Metadata: maps.Clone(req.Metadata)}
		f.refunds[r.ID] = r
		f.refundsOf[p.ID] = append(f.refundsOf[p.ID], r.ID)
		if f.pms[p.ID].paymentMethod == PMRefundFail {
			f.failLater = append(f.failLater, r.ID)
		}
		f.setRefunded(p.ID, amount)
		return savedAnswer{refund: r}
	})
	return a.refund, a.err
}

// setRefunded moves a payment's refunded amount by delta, and its status with it.
func (f *Fake) setRefunded(id string, delta int64) {
	p := f.payments[id]
	p.AmountRefunded += delta
	p.Status = provider.StatusSucceeded
	if p.AmountRefunded >= p.AmountReceived {
		p.Status = provider.StatusRefunded
	}
	f.payments[id] = p
}

// settle fails the refunds accepted to fail later (PMRefundFail): the money goes back to
// what is refundable.
func (f *Fake) settle() {
	for _, id := range f.failLater {
		r := f.refunds[id]
		r.Status, r.FailureReason = provider.RefundFailed, "expired_or_canceled_card"
		f.refunds[id] = r
		f.setRefunded(r.Payment, -r.Amount)
	}
	f.failLater = nil
}

// Refunds implements provider.Operations: newest first.
func (f *Fake) Refunds(_ context.Context, p provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		f.mu.Lock()
		f.init()
		f.settle()
		if _, ok := f.payments[p.Payment]; !ok {
			f.mu.Unlock()
			yield(provider.Refund{}, notFound("refunds"))
			return
		}
		var out []provider.Refund
		started := p.StartingAfter == ""
		for _, id := range slices.Backward(f.refundsOf[p.Payment]) {
			if !started {
				started = id == p.StartingAfter
				continue
			}
			out = append(out, f.refunds[id])
		}
		f.mu.Unlock()
		for _, r := range out {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Authenticate stands in for the customer completing (ok) or failing the authentication of a
// payment in StatusRequiresAction, as the simulator's POST
// /_sim/payment_intents/{id}/authenticate does: completed, the charge goes through (succeeded,
// or requires_capture for manual capture); failed, the payment is declined with
// payment_intent_authentication_failure.
func (f *Fake) Authenticate(_ context.Context, id string, ok bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, found := f.payments[id]
	switch {
	case !found:
		return notFound("authenticate")
	case p.Status != provider.StatusRequiresAction:
		return unexpectedState("authenticate", p)
	}
	if ok {
		f.authorized(&p)
	} else {
		c, _ := f.cardOf(f.pms[id].paymentMethod)
		p.Status, p.NextAction, p.ClientSecret, p.Card = provider.StatusDeclined, nil, "", &c
		p.Decline = &provider.Decline{Code: "payment_intent_authentication_failure", ErrorCode: "payment_intent_authentication_failure",
			Network: c.Brand, Message: "The provided PaymentMethod has failed authentication."}
	}
	f.payments[id] = p
	return nil
}

var _ Authenticator = (*Fake)(nil)
