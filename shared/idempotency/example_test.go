package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/runtwice/twice/infra/boltstore"
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
	k, _ := idempotency.NewKeeper(s, idempotency.Config{}, idempotency.WithLogger(slog.New(slog.DiscardHandler)))

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

// Middleware turns any handler into an idempotent one by the Idempotency-Key header.
func ExampleKeeper_Middleware() {
	s, done := openStore()
	defer done()
	k, _ := idempotency.NewKeeper(s, idempotency.Config{}, idempotency.WithLogger(slog.New(slog.DiscardHandler)))

	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Commit the order with the response, in one transaction.
		idempotency.Stage(r.Context(), store.Write{Table: "orders", Put: &store.Item{PK: "ord_1", Doc: []byte(`{}`)}})
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"ord_1"}`)
	})
	h := k.Middleware(idempotency.MiddlewareConfig{})(create)

	for _, body := range []string{`{"sku":"a"}`, `{"sku":"a"}`, `{"sku":"b"}`} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "checkout-7")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Header().Get("Idempotent-Replayed"))))
	}
	// Output:
	// 201
	// 201 true
	// 422
}
