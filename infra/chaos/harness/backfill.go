package harness

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/runtwice/twice/infra/inprocess"
	"github.com/runtwice/twice/shared/payments"
)

// dropDeliveries arms the simulator to lose rate of its webhook deliveries, chosen by the seed,
// and every delivery about customers (POST /_sim/webhooks/drop {"rate","seed","customers"});
// it survives the kills (the simulator keeps it).
func (s *simClient) dropDeliveries(ctx context.Context, rate float64, seed uint64, customers []string) error {
	return s.do(ctx, http.MethodPost, "/_sim/webhooks/drop", map[string]any{"rate": rate, "seed": seed, "customers": customers}, nil)
}

// dropped counts the events the simulator dropped.
func (s *simClient) dropped(ctx context.Context) (int, error) {
	var out struct {
		Data []struct{} `json:"data"`
	}
	err := s.do(ctx, http.MethodGet, "/_sim/events?state=dropped&limit=10000", nil, &out)
	return len(out.Data), err
}

// backfill runs backfill passes (POST /ops/backfill) until the event log is walked up to the
// last pass's start, as the schedule would pass after pass, and returns how many events they
// applied and how many passes it took. A pass that answers more (its limit or deadline) is
// followed by another, at most maxPasses in all.
func (o opsClient) backfill(ctx context.Context) (applied, passes int, err error) {
	const maxPasses = 1000
	for range maxPasses {
		var rep struct {
			Applied []string `json:"applied"`
			More    bool     `json:"more"`
		}
		if err := o.do(ctx, http.MethodPost, "/ops/backfill", map[string]any{}, &rep); err != nil {
			return applied, passes, err
		}
		applied += len(rep.Applied)
		passes++
		if !rep.More {
			return applied, passes, nil
		}
	}
	return applied, passes, fmt.Errorf("backfill: still more after %d passes", maxPasses)
}

// backfill is a walk of the backfill (opsClient.backfill), counted in the run's figures.
func (r *run) backfill(ctx context.Context) {
	applied, passes, err := r.ops().backfill(ctx)
	r.backfilled.Add(int64(applied))
	r.backfillPasses.Add(int64(passes))
	for {
		longest := r.backfillWalk.Load()
		if int64(passes) <= longest || r.backfillWalk.CompareAndSwap(longest, int64(passes)) {
			break
		}
	}
	if err != nil {
		r.log.Warn("backfill walk failed", "error", err)
	}
}

// settleUnheard settles, at the provider, every PaymentIntent of an unheard payment still
// processing there, as its plan says (POST /_sim/payment_intents/{id}/settle). Every event
// about them is dropped, so the stack can learn the outcome from the event log alone. It runs
// again while the run settles: a charge the stack makes late (after an unknown outcome) is
// settled on a later call.
func (r *run) settleUnheard(ctx context.Context) {
	if r.plan.Unheard() == 0 {
		return
	}
	settleAs := map[string]string{}
	for _, p := range r.plan.Payments {
		if p.SettleAs != "" {
			settleAs[payments.PaymentID("local", p.Key)] = p.SettleAs
		}
	}
	intents, err := r.sim.intents(ctx)
	if err != nil {
		r.log.Warn("unheard payments: list the provider's intents", "error", err)
		return
	}
	for _, in := range intents {
		outcome := settleAs[in.PaymentID]
		if outcome == "" || in.Status != "processing" {
			continue
		}
		body := map[string]string{"outcome": outcome}
		if outcome == SettleFailed {
			body["decline_code"] = SettleDeclineCode
		}
		if err := r.sim.do(ctx, http.MethodPost, "/_sim/payment_intents/"+in.ID+"/settle", body, nil); err != nil {
			r.log.Warn("unheard payment: settle at the provider", "intent", in.ID, "error", err)
			continue
		}
		r.unheardSettled.Add(1)
	}
}

// ops is the operator's client. A backfill pass or a reconciliation may take the stack's whole
// request deadline (retrying throttled calls), so it waits that long: a client that gave up
// sooner would cancel the pass it asked for, every time at the same place.
func (r *run) ops() opsClient {
	c := &http.Client{Transport: r.sim.http.Transport, Timeout: max(r.sim.http.Timeout, r.cfg.RequestTimeout+2*time.Second)}
	return opsClient{&simClient{http: c, base: "http://" + r.proc.api, apiKey: inprocess.DefaultOperatorToken}}
}
