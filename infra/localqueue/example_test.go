package localqueue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/infra/localqueue"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
)

// A poison message reaches the dead-letter queue after MaxReceiveCount receives, and an
// operator moves it back.
func ExampleQueue_MoveMessages() {
	dir, _ := os.MkdirTemp("", "localqueue-example")
	defer os.RemoveAll(dir)
	db, _ := bolt.Open(filepath.Join(dir, "twice.db"), 0o600, nil)
	defer db.Close()
	clock := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := localqueue.New(db, localqueue.Options{Clock: clock})
	defer b.Close()
	q, _ := b.Queue("webhooks", localqueue.Config{DeadLetter: "webhooks-dlq", MaxReceiveCount: 2})
	dlq, _ := b.Queue("webhooks-dlq", localqueue.Config{})

	ctx := context.Background()
	q.Send(ctx, []byte(`{"id":"evt_poison"}`), queue.SendOptions{Attributes: map[string]string{"provider": "stripe"}})
	for range 3 {
		msgs, _ := q.Receive(ctx, 1, 30*time.Second, 0)
		fmt.Println("received", len(msgs))
		clock.Advance(30 * time.Second)
	}
	dead, _ := dlq.Stats()
	fmt.Println("dead letters", dead.Visible)

	moved, _ := dlq.MoveMessages(ctx, q, 0)
	msgs, _ := q.Receive(ctx, 1, 30*time.Second, 0)
	fmt.Println("moved", moved, "then received", string(msgs[0].Body), msgs[0].Attributes["provider"], msgs[0].ReceiveCount)
	// Output:
	// received 1
	// received 1
	// received 0
	// dead letters 1
	// moved 1 then received {"id":"evt_poison"} stripe 1
}
