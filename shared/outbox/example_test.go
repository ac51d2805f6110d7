package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// A state change and its follow-on work commit together; the relay delivers the work.
func Example() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	s, _ := boltstore.Open(filepath.Join(dir, "twice.db"))
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	declined := store.Write{Table: "payments", Put: &store.Item{PK: "pay_1", Doc: []byte(`{"status":"declined"}`)}}
	start, _ := outbox.New("start_recovery", "recovery#pay_1#r1", map[string]string{"payment_id": "pay_1"}, now)
	_ = s.Transact(ctx, declined, start) // both or neither

	relay := &outbox.Relay{Store: s, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler),
		Handlers: map[string]outbox.Handler{"start_recovery": func(_ context.Context, m outbox.Message) error {
			fmt.Println("start recovery:", m.ID, string(m.Payload))
			return nil
		}}}
	delivered, failed, _ := relay.Drain(ctx)
	fmt.Println("delivered", delivered, "failed", failed)
	// Output:
	// start recovery: recovery#pay_1#r1 {"payment_id":"pay_1"}
	// delivered 1 failed 0
}
