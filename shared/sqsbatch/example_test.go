package sqsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// A consumer is a func over one plain message; Handler makes it the Lambda SQS handler
// (lambda.Start((&sqsbatch.Batch{Each: ...}).Handle), or queue.Consumer's Handler locally). The message that
// fails is reported alone, so SQS delivers only it again.
func ExampleHandler() {
	apply := func(_ context.Context, m queue.Message) error {
		if string(m.Body) == `{"id":"evt_bad"}` {
			return errors.New("cannot apply")
		}
		fmt.Printf("applied %s (delivery %d)\n", m.Body, m.ReceiveCount)
		return nil
	}
	h := (&sqsbatch.Batch{Each: apply, Log: slog.New(slog.DiscardHandler)}).Handle

	ev := queue.Event("arn:aws:sqs:us-east-1:123456789012:webhooks", "us-east-1", []queue.Message{
		{ID: "m1", Body: []byte(`{"id":"evt_ok"}`), ReceiveCount: 1},
		{ID: "m2", Body: []byte(`{"id":"evt_bad"}`), ReceiveCount: 1},
	})
	resp, err := h(context.Background(), ev)
	fmt.Println(resp.BatchItemFailures, err)
	// Output:
	// applied {"id":"evt_ok"} (delivery 1)
	// [{m2}] <nil>
}
