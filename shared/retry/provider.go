package retry

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Provider wraps a provider.Provider with the policy, so the rest of the code calls a provider
// that already retries. One Provider (and so one Budget) per provider account.
type Provider struct {
	Next   provider.Provider
	Policy *Policy
}

var _ provider.Provider = (*Provider)(nil)

// Create repeats an unknown outcome only because the request carries its idempotency key; a
// create without one is refused, since no retry of it (ours or the caller's) would be safe.
func (p *Provider) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	var out provider.Payment
	err := p.Policy.Do(ctx, "create", true, func(ctx context.Context) error {
		var err error
		out, err = p.Next.Create(ctx, req)
		return err
	})
	return out, err
}

// Get is a read: every unknown outcome may be repeated.
func (p *Provider) Get(ctx context.Context, id string) (provider.Payment, error) {
	var out provider.Payment
	err := p.Policy.Do(ctx, "get", true, func(ctx context.Context) error {
		var err error
		out, err = p.Next.Get(ctx, id)
		return err
	})
	return out, err
}

// PaymentMethodCard is a read: every unknown outcome may be repeated.
func (p *Provider) PaymentMethodCard(ctx context.Context, paymentMethod string) (provider.Card, error) {
	var out provider.Card
	err := p.Policy.Do(ctx, "payment_method", true, func(ctx context.Context) error {
		var err error
		out, err = p.Next.PaymentMethodCard(ctx, paymentMethod)
		return err
	})
	return out, err
}

// Confirm, like Create, needs its idempotency key.
func (p *Provider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	var out provider.Payment
	err := p.Policy.Do(ctx, "confirm", true, func(ctx context.Context) error {
		var err error
		out, err = p.Next.Confirm(ctx, req)
		return err
	})
	return out, err
}

// List resumes after the last payment it yielded when a page fails in a retryable way, so a
// retry never yields a payment twice. MaxAttempts counts the tries since the listing last moved
// on (listing), not across the whole listing.
func (p *Provider) List(ctx context.Context, params provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) {
		stopped := false
		err := p.listing(ctx, "list", func(ctx context.Context, moved func()) error {
			for pay, err := range p.Next.List(ctx, params) {
				if err != nil {
					return err
				}
				params.StartingAfter = pay.ID
				moved()
				if !yield(pay, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		})
		if err != nil && !stopped {
			yield(provider.Payment{}, err)
		}
	}
}

// listing runs walk, a listing that resumes where it stopped, under the policy. walk calls moved
// for each item it yields. When the policy gives up on a run of tries that moved the listing
// on, the count starts again, so one place in the listing is tried MaxAttempts times, at most
// twice that, and the listing's length does not matter. Counted across the whole listing, a
// log of many pages under a steady share of throttled pages (a reconciliation's, a backfill's)
// spent its attempts on the first few and failed, the more surely the longer it was. The retry
// budget and the deadline bound it as before.
func (p *Provider) listing(ctx context.Context, op string, walk func(ctx context.Context, moved func()) error) error {
	for {
		movedOn := false
		err := p.Policy.Do(ctx, op, true, func(ctx context.Context) error {
			return walk(ctx, func() { movedOn = true })
		})
		if err == nil || !movedOn || ctx.Err() != nil {
			return err
		}
	}
}

var _ provider.Searcher = (*Provider)(nil)

// KeyHorizon is the wrapped provider's; zero when it declares none (then every unknown create
// is searched for before anything is re-sent: the safe reading of "no promise").
func (p *Provider) KeyHorizon() time.Duration {
	if s, ok := p.Next.(provider.Searcher); ok {
		return s.KeyHorizon()
	}
	return 0
}

// SearchMetadata is a read: every unknown outcome may be repeated. A wrapped provider without
// search answers provider.ErrSearchUnsupported.
func (p *Provider) SearchMetadata(ctx context.Context, key, value string) ([]provider.Payment, error) {
	s, ok := p.Next.(provider.Searcher)
	if !ok {
		return nil, provider.ErrSearchUnsupported
	}
	var out []provider.Payment
	err := p.Policy.Do(ctx, "search", true, func(ctx context.Context) error {
		var err error
		out, err = s.SearchMetadata(ctx, key, value)
		return err
	})
	return out, err
}

var _ provider.Operations = (*Provider)(nil)

// operations is the wrapped provider's Operations, or provider.ErrOperationsUnsupported.
func (p *Provider) operations() (provider.Operations, error) {
	ops, ok := p.Next.(provider.Operations)
	if !ok {
		return nil, provider.ErrOperationsUnsupported
	}
	return ops, nil
}

// keyed runs one write of the wrapped Operations under the policy, as Create runs: refused
// before any call without its idempotency key, and an unknown outcome repeated under that key,
// so the provider does it once.
func keyed[T any](ctx context.Context, p *Provider, op, key string, call func(context.Context, provider.Operations) (T, error)) (T, error) {
	var out T
	if key == "" {
		return out, provider.ErrMissingIdempotencyKey
	}
	ops, err := p.operations()
	if err != nil {
		return out, err
	}
	err = p.Policy.Do(ctx, op, true, func(ctx context.Context) error {
		var err error
		out, err = call(ctx, ops)
		return err
	})
	return out, err
}

// Capture captures once per idempotency key (keyed).
func (p *Provider) Capture(ctx context.Context, req provider.CaptureRequest) (provider.Payment, error) {
	return keyed(ctx, p, "capture", req.IdempotencyKey, func(ctx context.Context, ops provider.Operations) (provider.Payment, error) {
		return ops.Capture(ctx, req)
	})
}

// Cancel cancels once per idempotency key (keyed).
func (p *Provider) Cancel(ctx context.Context, req provider.CancelRequest) (provider.Payment, error) {
	return keyed(ctx, p, "cancel", req.IdempotencyKey, func(ctx context.Context, ops provider.Operations) (provider.Payment, error) {
		return ops.Cancel(ctx, req)
	})
}

// Refund refunds once per idempotency key (keyed): a repeat under it is one refund.
func (p *Provider) Refund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	return keyed(ctx, p, "refund", req.IdempotencyKey, func(ctx context.Context, ops provider.Operations) (provider.Refund, error) {
		return ops.Refund(ctx, req)
	})
}

// Refunds, like List, resumes after the last refund it yielded when a page fails in a
// retryable way, so a retry never yields a refund twice.
func (p *Provider) Refunds(ctx context.Context, params provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		ops, err := p.operations()
		if err != nil {
			yield(provider.Refund{}, err)
			return
		}
		stopped := false
		err = p.listing(ctx, "refunds", func(ctx context.Context, moved func()) error {
			for r, err := range ops.Refunds(ctx, params) {
				if err != nil {
					return err
				}
				params.StartingAfter = r.ID
				moved()
				if !yield(r, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		})
		if err != nil && !stopped {
			yield(provider.Refund{}, err)
		}
	}
}

// ErrEventsUnsupported: the wrapped provider lists no event log.
var ErrEventsUnsupported = errors.New("retry: the provider lists no events")

var _ provider.EventLister = (*Provider)(nil)

// Events, like List, walks the wrapped provider's event log under the policy (a read: a
// throttled or failed page is retried, within the budget and the deadline) and resumes after
// the last event it yielded, in the walk's own direction, so a retry never yields an event
// twice and a throttled page costs a retry, not the reconciliation or backfill run.
func (p *Provider) Events(ctx context.Context, q provider.EventQuery) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		lister, ok := p.Next.(provider.EventLister)
		if !ok {
			yield(provider.Event{}, ErrEventsUnsupported)
			return
		}
		stopped := false
		err := p.listing(ctx, "events", func(ctx context.Context, moved func()) error {
			for ev, err := range lister.Events(ctx, q) {
				if err != nil {
					return err
				}
				if q.After != "" {
					q.After = ev.ID // oldest first: continue after it
				} else {
					q.Before = ev.ID // newest first: continue below it
				}
				moved()
				if !yield(ev, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		})
		if err != nil && !stopped {
			yield(provider.Event{}, err)
		}
	}
}
