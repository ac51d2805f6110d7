package localqueue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"
	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/infra/localqueue"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
)

// A Lambda SQS handler that fails one message runs unchanged over the local queue: the
// success is deleted, the failure comes back after the visibility timeout.
func ExampleQueue_consumer() {
	dir, _ := os.MkdirTemp("", "queue-example")
	defer os.RemoveAll(dir)
	db, _ := bolt.Open(filepath.Join(dir, "twice.db"), 0o600, nil)
	defer db.Close()
	clock := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := localqueue.New(db, localqueue.Options{Clock: clock})
	defer broker.Close()
	q, _ := broker.Queue("webhooks", localqueue.Config{DeadLetter: "webhooks-dlq", MaxReceiveCount: 5})

	ctx := context.Background()
	q.Send(ctx, []byte(`{"id":"evt_ok"}`), queue.SendOptions{})
	q.Send(ctx, []byte(`{"id":"evt_bad"}`), queue.SendOptions{})

	handler := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if r.Body == `{"id":"evt_bad"}` {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	c := &queue.Consumer{Queue: q, Handler: handler, Visibility: 30 * time.Second}
	res, _ := c.Poll(ctx)
	fmt.Printf("received %d, deleted %d, failed %d\n", res.Received, res.Deleted, res.Failed)

	clock.Advance(30 * time.Second)
	msgs, _ := q.Receive(ctx, 10, time.Minute, 0)
	fmt.Printf("redelivered %s, receive count %d\n", msgs[0].Body, msgs[0].ReceiveCount)
	// Output:
	// received 2, deleted 1, failed 1
	// redelivered {"id":"evt_bad"}, receive count 2
}
