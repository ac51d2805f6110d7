package idemlambda_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/idempotency/idemlambda"
)

func exampleKeeper() (*idempotency.Keeper, func()) {
	dir, _ := os.MkdirTemp("", "example")
	s, err := boltstore.Open(filepath.Join(dir, "twice.db"))
	if err != nil {
		panic(err)
	}
	k, _ := idempotency.NewKeeper(idempotency.Keeper{Store: s, Log: slog.New(slog.DiscardHandler)})
	return k, func() { s.Close(); os.RemoveAll(dir) }
}

// Wrap makes a handler of any event type idempotent. The key is a JSONPath over the event; a
// repeat gets the stored result, and one whose validated part differs is refused. In a Lambda:
// lambda.Start(h).
func ExampleWrap() {
	k, done := exampleKeeper()
	defer done()

	type Order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
		Trace  string `json:"trace"`
	}
	h, err := idemlambda.Wrap(idemlambda.Config[string]{
		Keeper:         k,
		KeyPath:        "$.id",
		ValidationPath: "$.amount",
		KeyPrefix:      "orders",
	}, func(_ context.Context, o Order) (string, error) {
		fmt.Println("charging", o.ID)
		return "charged " + o.ID, nil
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	fmt.Println(h(ctx, Order{ID: "o-1", Amount: 500, Trace: "a"}))
	fmt.Println(h(ctx, Order{ID: "o-1", Amount: 500, Trace: "b"})) // a redelivery: not charged again
	_, err = h(ctx, Order{ID: "o-1", Amount: 900})
	fmt.Println(errors.Is(err, idempotency.ErrMismatch))
	// Output:
	// charging o-1
	// charged o-1 <nil>
	// charged o-1 <nil>
	// true
}

// SQS runs each record of a batch under its own key (its message id by default) and reports
// only the failed records, so SQS redelivers those alone; a record that completed is not run
// again when its message comes back. In a Lambda with ReportBatchItemFailures: lambda.Start(h).
func ExampleSQS() {
	k, done := exampleKeeper()
	defer done()

	attempts := map[string]int{}
	h, err := idemlambda.SQS(idemlambda.Config[struct{}]{Keeper: k, KeyPrefix: "jobs", Log: slog.New(slog.DiscardHandler)},
		func(_ context.Context, m events.SQSMessage) error {
			attempts[m.MessageId]++
			if m.MessageId == "m2" && attempts["m2"] == 1 {
				return errors.New("downstream busy")
			}
			return nil
		})
	if err != nil {
		panic(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "a"}, {MessageId: "m2", Body: "b"}}}
	for range 2 { // the second delivery is SQS's redelivery of the whole batch
		resp, _ := h(context.Background(), batch)
		fmt.Println("failed:", resp.BatchItemFailures)
	}
	fmt.Println("m1 ran", attempts["m1"], "m2 ran", attempts["m2"])
	// Output:
	// failed: [{m2}]
	// failed: []
	// m1 ran 1 m2 ran 2
}
