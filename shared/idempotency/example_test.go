package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/store"
)

func openStore() (*boltstore.Store, func()) {
	dir, _ := os.MkdirTemp("", "example")
	s, err := boltstore.Open(filepath.Join(dir, "twice.db"))
	if err != nil {
		panic(err)
	}
	return s, func() { s.Close(); os.RemoveAll(dir) }
}

// Do runs an operation once per key; a repeat gets the stored response and the operation does
// not run again.
func ExampleKeeper_Do() {
	s, done := openStore()
	defer done()
	k, _ := idempotency.NewKeeper(idempotency.Keeper{Store: s, Log: slog.New(slog.DiscardHandler)})

	charges := 0
	charge := func(ctx context.Context) (idempotency.Result, error) {
		charges++
		payment := store.Item{PK: "pay_1", Doc: []byte(`{"amount":1000}`)}
		return idempotency.Result{
			Response: idempotency.Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)},
			Effects:  []store.Write{{Table: "payments", Put: &payment, Cond: store.Cond{Kind: store.NotExists}}},
			Final:    true,
		}, nil
	}
	fp, _ := idempotency.FingerprintJSON([]byte(`{"amount":1000}`))
	for range 2 {
		out, err := k.Do(context.Background(), "caller-1", "order-42", fp, charge)
		if err != nil {
			panic(err)
		}
		fmt.Println(out.Kind, out.Response.Status, string(out.Response.Body))
	}
	fmt.Println("charges:", charges)
	// Output:
	// new 201 {"id":"pay_1"}
	// replay 201 {"id":"pay_1"}
	// charges: 1
}

// Do makes a function of any result type idempotent: the result is stored with a codec (JSON by
// default) and a repeat decodes it instead of running the function again.
func ExampleDo() {
	s, done := openStore()
	defer done()
	k, _ := idempotency.NewKeeper(idempotency.Keeper{Store: s, Log: slog.New(slog.DiscardHandler)})

	type Receipt struct {
		OrderID string `json:"order_id"`
		Total   int    `json:"total"`
	}
	charges := 0
	charge := func(ctx context.Context) (Receipt, error) {
		charges++
		return Receipt{OrderID: "ord_7", Total: 1200}, nil
	}
	fp, _ := idempotency.FingerprintJSON([]byte(`{"order":"ord_7"}`))
	for range 2 {
		r, out, err := idempotency.Do(context.Background(), k, "shop", "ord_7", fp, charge)
		fmt.Println(out.Kind, r.OrderID, r.Total, err)
	}
	other, _ := idempotency.FingerprintJSON([]byte(`{"order":"ord_8"}`))
	_, _, err := idempotency.Do(context.Background(), k, "shop", "ord_7", other, charge)
	fmt.Println(err)
	fmt.Println("charges:", charges)
	// Output:
	// new ord_7 1200 <nil>
	// replay ord_7 1200 <nil>
	// idempotency: key ord_7 used with a different request (fields [order])
	// charges: 1
}
