package stripesim_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// The adapter's behaviour against a stateful Stripe: the provider simulator, served on a real
// loopback HTTP server. stripe-mock cannot serve here: it is stateless and never declines
// (TestRequestShapesAgainstStripeMock checks what it can: the shapes of the same calls).
func TestAdapterPassesTheProviderSuite(t *testing.T) {
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir(),
		// A refund of pm_card_refundFail fails this long after it was accepted; the running
		// simulator applies it on its own, as Stripe does.
		RefundFailureDelay: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	ctx, cancel := context.WithCancel(context.Background())
	sim.Start(ctx)
	t.Cleanup(func() {
		cancel()
		srv.Close()
		sim.Close()
	})
	providertest.Run(t, "suite", func(t *testing.T) provider.Provider {
		c, err := stripeprovider.New(stripeprovider.Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return simClient{Client: c, sim: srv.URL}
	})
}

// simClient is the adapter under test plus the simulator's stand-in for the customer.
type simClient struct {
	*stripeprovider.Client
	sim string
}

var _ providertest.Authenticator = simClient{}

// Authenticate calls POST /_sim/payment_intents/{id}/authenticate.
func (c simClient) Authenticate(ctx context.Context, id string, ok bool) error {
	result := "failed"
	if ok {
		result = "succeeded"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.sim+"/_sim/payment_intents/"+id+"/authenticate",
		strings.NewReader(`{"result":"`+result+`"}`))
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("authenticate %s: %d %s", id, res.StatusCode, body)
	}
	return nil
}
