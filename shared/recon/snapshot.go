package recon

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// snapshot gathers both sides of w, widened by the margin, and then what each side points to
// outside it: the local payment a provider payment names, the provider payment a local payment
// names. Only then can "missing" be told from "just across the edge".
func (r *Reconciler) snapshot(ctx context.Context, w Window) (Snapshot, error) {
	now := r.now().UTC()
	wide := Window{From: w.From.Add(-r.margin()), To: w.To.Add(r.margin())}
	if wide.To.After(now) {
		wide.To = now
	}
	snap := Snapshot{Window: w, Now: now}

	for p, err := range r.Provider.List(ctx, provider.ListParams{CreatedFrom: wide.From, CreatedTo: wide.To}) {
		if err != nil {
			return Snapshot{}, err
		}
		snap.Remote = append(snap.Remote, p)
	}
	if r.Events != nil {
		if err := r.changedInWindow(ctx, wide, &snap); err != nil {
			return Snapshot{}, err
		}
	}
	local, err := localPayments(ctx, r.Store, wide)
	if err != nil {
		return Snapshot{}, err
	}
	snap.Local = local
	// Payments whose bound in a non-final status ends in the window: created that long before
	// it, one range a distinct bound.
	bounds := map[time.Duration]bool{}
	for _, st := range payments.OpenStatuses {
		bounds[r.Bounds.StuckAfter(st)] = true
	}
	for bound := range bounds {
		open, err := localPayments(ctx, r.Store, Window{From: w.From.Add(-bound), To: w.To.Add(-bound)})
		if err != nil {
			return Snapshot{}, err
		}
		for _, p := range open {
			if r.Bounds.StuckAfter(p.Status) == bound {
				snap.Open = append(snap.Open, p)
			}
		}
	}

	have := map[string]bool{}
	haveProvider := map[string]bool{}
	for _, p := range snap.Local {
		have[p.ID] = true
		if p.ProviderPaymentID != "" {
			haveProvider[p.ProviderPaymentID] = true
		}
	}
	for _, rp := range snap.Remote {
		if have[rp.Metadata["twice_payment_id"]] || haveProvider[rp.ID] {
			continue
		}
		p, err := r.localFor(ctx, rp)
		if errors.Is(err, payments.ErrNotFound) {
			continue
		}
		if err != nil {
			return Snapshot{}, err
		}
		if !have[p.ID] {
			have[p.ID] = true
			snap.Local = append(snap.Local, p)
		}
	}

	listed := map[string]bool{}
	for _, rp := range snap.Remote {
		listed[rp.ID] = true
	}
	for _, p := range snap.Local {
		if p.ProviderPaymentID == "" || listed[p.ProviderPaymentID] {
			continue
		}
		rp, err := r.Provider.Get(ctx, p.ProviderPaymentID)
		if errors.Is(err, provider.ErrNotFound) {
			continue // missing at the provider: Classify says so
		}
		if err != nil {
			return Snapshot{}, err
		}
		listed[rp.ID] = true
		snap.Remote = append(snap.Remote, rp)
	}
	if err := r.gatherRefunds(ctx, &snap); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// localFor finds our payment for a provider payment: by the id it carries in its metadata, else
// by the provider id alias.
func (r *Reconciler) localFor(ctx context.Context, rp provider.Payment) (payments.Payment, error) {
	if id := rp.Metadata["twice_payment_id"]; id != "" {
		p, err := payments.Get(ctx, r.Store, id)
		if !errors.Is(err, payments.ErrNotFound) {
			return p, err
		}
	}
	id, err := payments.ByProviderID(ctx, r.Store, rp.ID)
	if err != nil {
		return payments.Payment{}, err
	}
	return payments.Get(ctx, r.Store, id)
}

// localPayments reads the payments created in w from the day partitions of the payments
// table's created-time index, each day's shards merged in time order. Sort keys start with the
// RFC 3339 time, whose fraction has no fixed width, so the bounds are whole-second prefixes
// ("~" sorts after "Z", "." and digits) and the exact filter is applied to the decoded times.
func localPayments(ctx context.Context, s store.Store, w Window) ([]payments.Payment, error) {
	const second = "2006-01-02T15:04:05"
	from, to := w.From.UTC().Format(second), w.To.UTC().Format(second)+"~"
	var out []payments.Payment
	lastDay := w.To.UTC().Truncate(24 * time.Hour)
	for day := w.From.UTC().Truncate(24 * time.Hour); !day.After(lastDay); day = day.Add(24 * time.Hour) {
		var derr error
		err := payments.DayIndex(day).Walk(ctx, s, store.Query{Table: payments.Table, SKFrom: from, SKTo: to}, func(it store.Item) bool {
			p, err := payments.Decode(it)
			if err != nil {
				derr = err
				return false
			}
			if w.Contains(p.CreatedAt) {
				out = append(out, p)
			}
			return true
		})
		if err = cmp.Or(derr, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// changedInWindow adds the provider payments that the provider's events in w name (a refund,
// a dispute, a late success of a payment created before w) and notes each one's newest event.
func (r *Reconciler) changedInWindow(ctx context.Context, w Window, snap *Snapshot) error {
	snap.Changed = map[string]time.Time{}
	for ev, err := range r.Events.Events(ctx, provider.EventQuery{CreatedFrom: w.From, CreatedTo: w.To}) {
		if err != nil {
			return err
		}
		de, err := webhooks.DecodeStripe(ev.Body)
		if err != nil || de.PaymentIntent == nil || de.PaymentIntent.ID == "" {
			continue // not about a payment
		}
		if t, ok := snap.Changed[de.PaymentIntent.ID]; !ok || ev.Created.After(t) {
			snap.Changed[de.PaymentIntent.ID] = ev.Created
		}
	}
	listed := map[string]bool{}
	for _, rp := range snap.Remote {
		listed[rp.ID] = true
	}
	ids := make([]string, 0, len(snap.Changed))
	for id := range snap.Changed {
		if !listed[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		rp, err := r.Provider.Get(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		snap.Remote = append(snap.Remote, rp)
	}
	return nil
}
