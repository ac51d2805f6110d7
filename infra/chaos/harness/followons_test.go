package harness

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/outbox"
)

// An undelivered outbox message in a stopped stack's data, whichever shard of the due list
// holds it, is a lost follow-on.
func TestReadFollowOnsCountsUndeliveredMessages(t *testing.T) {
	data := t.TempDir()
	st, err := boltstore.Open(filepath.Join(data, "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"change#pay_1#1", "recovery#pay_2#r1", "resolve#pay_3#1"} {
		w, err := outbox.New("k", id, nil, time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Transact(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	lost, examples, err := readFollowOns(ctx, data, nil)
	if err != nil || lost != 3 || len(examples) != 3 || !strings.Contains(strings.Join(examples, "\n"), "recovery#pay_2#r1") {
		t.Fatalf("lost %d, %v, %v; want the 3 messages", lost, examples, err)
	}
}
