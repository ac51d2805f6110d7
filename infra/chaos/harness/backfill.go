package harness

import (
	"context"
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

// backfill runs one backfill pass (POST /ops/backfill) and returns how many events it applied.
func (o opsClient) backfill(ctx context.Context) (int, error) {
	var rep struct {
		Applied []string `json:"applied"`
	}
	err := o.do(ctx, http.MethodPost, "/ops/backfill", map[string]any{}, &rep)
	return len(rep.Applied), err
}

func (r *run) ops() opsClient {
	return opsClient{&simClient{http: r.sim.http, base: "http://" + r.proc.api, apiKey: inprocess.DefaultOperatorToken}}
}
