package harness

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runtwice/twice/infra/inprocess"
)

// dropDeliveries arms the simulator to lose rate of its webhook deliveries, chosen by the seed
// (POST /_sim/webhooks/drop {"rate","seed"}); it survives the kills (the simulator keeps it).
func (s *simClient) dropDeliveries(ctx context.Context, rate float64, seed uint64) error {
	return s.do(ctx, http.MethodPost, "/_sim/webhooks/drop", map[string]any{"rate": rate, "seed": seed}, nil)
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
// applied. A pass that answers more (its limit or deadline) is followed by another, at most
// maxPasses in all.
func (o opsClient) backfill(ctx context.Context) (int, error) {
	const maxPasses = 1000
	applied := 0
	for range maxPasses {
		var rep struct {
			Applied []string `json:"applied"`
			More    bool     `json:"more"`
		}
		if err := o.do(ctx, http.MethodPost, "/ops/backfill", map[string]any{}, &rep); err != nil {
			return applied, err
		}
		applied += len(rep.Applied)
		if !rep.More {
			return applied, nil
		}
	}
	return applied, fmt.Errorf("backfill: still more after %d passes", maxPasses)
}

func (r *run) ops() opsClient {
	return opsClient{&simClient{http: r.sim.http, base: "http://" + r.proc.api, apiKey: inprocess.DefaultOperatorToken}}
}
