package localqueue

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue/queuetest"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "queue.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newBroker(t testing.TB, c clock.Clock) *Broker {
	b := New(openDB(t), Options{Clock: c})
	t.Cleanup(func() { b.Close() })
	return b
}

func TestContract(t *testing.T) {
	queuetest.Run(t, queuetest.Suite{
		Tick: 30 * time.Second,
		New: func(t *testing.T) queuetest.Fixture {
			clock := clock.NewFake(epoch)
			b := newBroker(t, clock)
			q, err := b.Queue("webhooks", Config{DeadLetter: "webhooks-dlq", MaxReceiveCount: queuetest.MaxReceiveCount})
			if err != nil {
				t.Fatal(err)
			}
			dlq, err := b.Queue("webhooks-dlq", Config{})
			if err != nil {
				t.Fatal(err)
			}
			return queuetest.Fixture{Queue: q, DLQ: dlq, Now: clock.Now, Advance: clock.Advance}
		},
	})
}
