package dynamo_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/store"
)

// A duplicate idempotency key costs one PutItem, and the stored record comes back with the
// failure. (Needs DynamoDB Local on port 8000, so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	var calls dynamo.CallCounter
	client := dynamo.NewClient("http://127.0.0.1:8000", func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.Middleware())
	})
	if err := dynamo.CreateTable(ctx, client, "twice-local-idempotency", false, false); err != nil {
		fmt.Println(err)
		return
	}
	s := dynamo.New(client, map[string]string{"idempotency": "twice-local-idempotency"})

	rec := store.Item{PK: "acct_1#order-42", Doc: []byte(`{"status":"completed"}`), Version: 1}
	acquire := store.Cond{Kind: store.NotExistsOrLapsed, Now: 1_800_000_000}
	_ = s.Put(ctx, "idempotency", rec, acquire)

	calls.Reset()
	err := s.Put(ctx, "idempotency", rec, acquire)
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		fmt.Printf("replay %s, %v\n", ce.Old.Doc, calls.Counts())
	}
	// Output would be:
	// replay {"status":"completed"}, map[PutItem:1]
}

// The counter counts every request sent, retries included. Nothing listens on port 1, so the
// put fails after the two attempts this client allows.
func ExampleCallCounter() {
	var calls dynamo.CallCounter
	client := dynamo.NewClient("http://127.0.0.1:1", func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 2
		o.APIOptions = append(o.APIOptions, calls.Middleware())
	})
	s := dynamo.New(client, map[string]string{"idempotency": "twice-local-idempotency"})

	err := s.Put(context.Background(), "idempotency", store.Item{PK: "k"}, store.Cond{Kind: store.NotExists})
	fmt.Println(err)
	fmt.Println(calls.Counts(), calls.Total())
	// Output:
	// dynamo: PutItem idempotency: request failed after 2 attempts: connect: connection refused
	// map[PutItem:2] 2
}
