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

// A Lambda SQS handler runs unchanged over the local queue: the message it handles is deleted
// and the one it fails comes back after the visibility timeout. After MaxReceiveCount receives
// the failing message is in the dead-letter queue, and an operator moves it back.
func ExampleQueue_consumer() {
	dir, _ := os.MkdirTemp("", "localqueue-example")
	defer os.RemoveAll(dir)
	db, _ := bolt.Open(filepath.Join(dir, "twice.db"), 0o600, nil)
	defer db.Close()
	clock := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := localqueue.New(db, localqueue.Options{Clock: clock})
	defer broker.Close()
	q, _ := broker.Queue("webhooks", localqueue.Config{DeadLetter: "webhooks-dlq", MaxReceiveCount: 2})
	dlq, _ := broker.Queue("webhooks-dlq", localqueue.Config{})

	ctx := context.Background()
	q.Send(ctx, []byte(`{"id":"evt_ok"}`), queue.SendOptions{})
	q.Send(ctx, []byte(`{"id":"evt_poison"}`), queue.SendOptions{Attributes: map[string]string{"provider": "stripe"}})

	handler := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if r.Body == `{"id":"evt_poison"}` {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	c := &queue.Consumer{Queue: q, Handler: handler, Visibility: 30 * time.Second}
	for range 2 {
		res, _ := c.Poll(ctx)
		fmt.Printf("received %d, deleted %d, failed %d\n", res.Received, res.Deleted, res.Failed)
		clock.Advance(30 * time.Second)
	}
	msgs, _ := q.Receive(ctx, 10, 30*time.Second, 0)
	dead, _ := dlq.Stats()
	fmt.Println("third receive", len(msgs), "dead letters", dead.Visible)

	moved, _ := dlq.MoveMessages(ctx, q, 0)
	msgs, _ = q.Receive(ctx, 10, 30*time.Second, 0)
	fmt.Println("moved", moved, "then received", string(msgs[0].Body), msgs[0].Attributes["provider"], msgs[0].ReceiveCount)
	// Output:
	// received 2, deleted 1, failed 1
	// received 1, deleted 0, failed 1
	// third receive 0 dead letters 1
	// moved 1 then received {"id":"evt_poison"} stripe 1
}
