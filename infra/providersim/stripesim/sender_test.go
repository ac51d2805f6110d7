package stripesim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestSendersKeepTheirConnections: the webhook senders reuse their connections from one pass
// to the next. With Go's default transport (2 idle connections a host), 4 senders lost 2
// connections at the end of every pass and opened 2 more in the next: 160 deliveries in 20
// passes opened about 40. Go's transport may still dial one more than it needs when a request
// and a returning connection cross, so the bound is loose: one connection for 8 deliveries.
func TestSendersKeepTheirConnections(t *testing.T) {
	const senders, rounds, perRound = 4, 20, 8
	var opened, received atomic.Int64
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
	}))
	rcv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	rcv.Start()
	defer rcv.Close()
	h := newHarness(t, func(c *Config) { c.WebhookURL, c.SenderConcurrency = rcv.URL, senders })
	ctx := context.Background()
	// Rounds of payments, each delivered by a pass of its own, as the background sender does
	// when payments keep coming: the connections must outlive the pass.
	for r := range rounds {
		for i := range perRound {
			if _, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", fmt.Sprint("conn-", r, "-", i))); err != nil {
				t.Fatal(err)
			}
		}
		for pass := 0; received.Load() < int64((r+1)*perRound); pass++ {
			if pass == 10 {
				t.Fatalf("%d webhooks received after 10 passes, want %d", received.Load(), (r+1)*perRound)
			}
			if _, err := h.sim.Deliver(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, d := opened.Load(), received.Load(); n > d/8 {
		t.Fatalf("%d deliveries by %d senders opened %d connections, want at most %d", d, senders, n, d/8)
	}
	t.Logf("%d deliveries, %d connections", received.Load(), opened.Load())
}
