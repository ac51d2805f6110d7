package attempts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
)

// Record an outbound call and an inbound webhook for one payment, then answer "was this
// delivered?" by the payment id.
func Example() {
	dir, _ := os.MkdirTemp("", "attempts-example")
	defer os.RemoveAll(dir)
	s, err := boltstore.Open(filepath.Join(dir, "twice.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	log, err := attempts.NewLog(attempts.Log{Store: s, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	_ = log.Record(ctx, attempts.Attempt{
		ID: "att_1", Direction: attempts.Outbound, Provider: "stripe", Operation: "payment_intents.create",
		Method: "POST", Path: "/v1/payment_intents",
		RequestHeader: map[string]string{"Authorization": "Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc"},
		RequestBody:   "amount=1000&currency=usd&card[number]=4242424242424242&card[cvc]=123",
		Status:        200, Result: attempts.ResultOK,
		StartedAt: now, Duration: 180 * time.Millisecond,
		IdempotencyKey: "twice-3f2a", PaymentID: "pay_1",
	})
	_ = log.Record(ctx, attempts.Attempt{
		ID: "att_2", Direction: attempts.Inbound, Provider: "stripe", Operation: "webhook stripe",
		Method: "POST", Path: "/webhooks/stripe", Status: 200, Result: attempts.ResultOK,
		StartedAt: now.Add(2 * time.Second), EventID: "evt_1", PaymentID: "pay_1",
	})

	page, err := log.Lookup(ctx, attempts.ByPaymentID, "pay_1", "")
	if err != nil {
		panic(err)
	}
	for _, a := range page.Attempts {
		fmt.Println(a.StartedAt.Format(time.TimeOnly), a.Direction, a.Operation, a.Status, a.Result)
	}
	// Lookup returns summaries; Get has the redacted headers and bodies.
	first, err := log.Get(ctx, page.Attempts[1].ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.RequestHeader["Authorization"])
	fmt.Println(first.RequestBody)
	// Output:
	// 08:00:02 inbound webhook stripe 200 ok
	// 08:00:00 outbound payment_intents.create 200 ok
	// Bearer [redacted]
	// amount=1000&currency=usd&card[number]=[card+****4242]&card[cvc]=[redacted]
}
