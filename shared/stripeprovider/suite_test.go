package stripeprovider

import (
	"net/http/httptest"
	"testing"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
)

// The adapter's behaviour against a stateful Stripe: the provider simulator, served on a real
// loopback HTTP server. stripe-mock cannot serve here: it is stateless and never declines.
func TestAdapterPassesTheProviderSuite(t *testing.T) {
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	providertest.Run(t, "suite", func(t *testing.T) provider.Provider {
		c, err := New(Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
