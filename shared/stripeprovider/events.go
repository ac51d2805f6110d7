package stripeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/stripe/stripe-go/v82"
)

var _ provider.EventLister = (*Client)(nil)

// Events lists Stripe's event log through stripe-go's V1Events.List (auto-pagination over
// starting_after, or ending_before with q.After; ListPageSize a page). Each event's body is the event as stripe-go decoded
// it, encoded again: the shape a webhook delivery carries (id, object, type, created, data).
func (c *Client) Events(ctx context.Context, q provider.EventQuery) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		params := &stripe.EventListParams{}
		params.Limit = stripe.Int64(ListPageSize)
		if !q.CreatedFrom.IsZero() || !q.CreatedTo.IsZero() {
			r := &stripe.RangeQueryParams{}
			if !q.CreatedFrom.IsZero() {
				r.GreaterThanOrEqual = q.CreatedFrom.Unix()
			}
			if !q.CreatedTo.IsZero() {
				r.LesserThanOrEqual = q.CreatedTo.Unix()
			}
			params.CreatedRange = r
		}
		if q.Undelivered {
			params.DeliverySuccess = stripe.Bool(false)
		}
		for _, t := range q.Types {
			params.Types = append(params.Types, stripe.String(t))
		}
		// stripe-go pages toward newer events with ending_before and reverses each page, so
		// the sequence runs oldest first.
		if q.After != "" {
			params.EndingBefore = stripe.String(q.After)
		} else if q.Before != "" {
			params.StartingAfter = stripe.String(q.Before)
		}
		ctx, ex := withExchange(ctx)
		for ev, err := range c.sc.V1Events.List(ctx, params) {
			if err != nil {
				yield(provider.Event{}, c.mapError("events.list", "", err, ex))
				return
			}
			body, err := json.Marshal(ev)
			if err != nil {
				yield(provider.Event{}, fmt.Errorf("stripeprovider: encode event %s: %w", ev.ID, err))
				return
			}
			if !yield(provider.Event{ID: ev.ID, Type: string(ev.Type), Created: time.Unix(ev.Created, 0).UTC(), Body: body}, nil) {
				return
			}
		}
	}
}

var _ provider.EventLister = (*SecretKeyed)(nil)

// Events implements provider.EventLister with the key in force now.
func (s *SecretKeyed) Events(ctx context.Context, q provider.EventQuery) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		c, err := s.current(ctx)
		if err != nil {
			yield(provider.Event{}, err)
			return
		}
		for ev, err := range c.Events(ctx, q) {
			if !yield(ev, err) {
				return
			}
		}
	}
}
