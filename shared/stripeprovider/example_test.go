package stripeprovider_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/retry"
	"github.com/runtwice/twice/shared/stripeprovider"
)

type printObserver struct{}

func (printObserver) Observe(_ context.Context, c stripeprovider.Call) {
	fmt.Println(c.Method, c.Path, c.StatusCode, c.IdempotencyKey[:10]+"...")
}

func Example() {
	// A stand-in for Stripe that declines every card for insufficient funds.
	stripe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		io.WriteString(w, `{"error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
		  "advice_code": "try_again_later",
		  "payment_intent": {"id": "pi_1", "status": "requires_payment_method", "amount": 1999, "currency": "usd",
		    "last_payment_error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}}}}`)
	}))
	defer stripe.Close()

	adapter, err := stripeprovider.New(stripeprovider.Client{
		APIKey:   "sk_test_example",
		BaseURL:  stripe.URL,
		Observer: printObserver{},
	})
	if err != nil {
		panic(err)
	}
	payments := &retry.Provider{Next: adapter, Policy: retry.New(retry.Policy{Rand: rand.New(rand.NewPCG(1, 1))})}

	p, err := payments.Create(context.Background(), provider.CreateRequest{
		Amount: 1999, Currency: "usd", Customer: "cus_1", PaymentMethod: "pm_card_visa",
		IdempotencyKey: provider.IdempotencyKey("local", "order-42"),
	})
	fmt.Println(p.ID, p.Status, p.Decline.Code, p.Decline.AdviceCode, err != nil)
	// Output:
	// POST /v1/payment_intents 402 twice_pay_...
	// pi_1 declined insufficient_funds try_again_later true
}
