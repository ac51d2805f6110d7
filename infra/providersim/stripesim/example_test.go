package stripesim_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/stripe/stripe-go/v82"
)

// The production stripe-go client talks to the simulator through a backend URL.
func Example() {
	dir, _ := os.MkdirTemp("", "providersim")
	defer os.RemoveAll(dir)
	sim, err := stripesim.New(stripesim.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	srv := httptest.NewServer(sim)
	defer srv.Close()

	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(srv.URL), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
	sc := stripe.NewClient(stripesim.DefaultAPIKey, stripe.WithBackends(&stripe.Backends{
		API: backend, Connect: backend, Uploads: backend, MeterEvents: backend}))

	for _, pm := range []string{"pm_card_visa", "pm_card_visa_chargeDeclinedInsufficientFunds"} {
		p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd"),
			PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true)}
		p.SetIdempotencyKey("order-1/" + pm)
		pi, err := sc.V1PaymentIntents.Create(context.Background(), p)
		var se *stripe.Error
		if errors.As(err, &se) {
			fmt.Println(se.HTTPStatusCode, se.Code, se.DeclineCode, se.PaymentIntent.Status)
			continue
		}
		fmt.Println(pi.Status, pi.AmountReceived)
	}
	// Output:
	// succeeded 1000
	// 402 card_declined insufficient_funds requires_payment_method
}
