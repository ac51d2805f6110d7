package stripeprovider

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
)

// The adapter's behaviour against a stateful Stripe: the local provider simulator (or Stripe's
// test mode). stripe-mock cannot serve here: it is stateless and never declines.
func TestAdapterPassesTheProviderSuite(t *testing.T) {
	base := os.Getenv("TWICE_TEST_PROVIDER_SIM")
	if base == "" {
		t.Skip("TWICE_TEST_PROVIDER_SIM unset: point it at a running provider simulator")
	}
	apiKey := os.Getenv("TWICE_STRIPE_API_KEY")
	if apiKey == "" {
		apiKey = "sk_test_twice_local"
	}
	// The simulator keeps its idempotency keys across runs: a scope per run keeps runs apart.
	scope := "suite-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	providertest.Run(t, scope, func(t *testing.T) provider.Provider {
		c, err := New(Config{APIKey: apiKey, BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
