package stripeprovider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runtwice/twice/shared/provider"
)

// TestConcurrentCallsKeepTheirConnections: a process that calls the provider side by side
// reuses its connections. With Go's default transport (2 idle connections a host), 16
// callers making 20 calls each opened about 180 connections for their 320 calls. Go's
// transport may still dial one more than it needs when a request and a returning connection
// cross, so the bound is loose: one connection for 4 calls.
func TestConcurrentCallsKeepTheirConnections(t *testing.T) {
	const callers, calls = 16, 20
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":1999,"currency":"usd"}`)
	}))
	var opened atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newTestClient(t, srv.URL, nil, 0)
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for i := range callers {
		wg.Go(func() {
			for j := range calls {
				_, err := c.Create(context.Background(), provider.CreateRequest{Amount: 1999, Currency: "usd",
					Customer: "cus_1", PaymentMethod: "pm_card_visa",
					IdempotencyKey: provider.IdempotencyKey("conns", fmt.Sprint(i, "-", j))})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := opened.Load(); n > callers*calls/4 {
		t.Fatalf("%d calls from %d callers opened %d connections, want at most %d", callers*calls, callers, n, callers*calls/4)
	}
	t.Logf("%d calls, %d connections", callers*calls, opened.Load())
}
