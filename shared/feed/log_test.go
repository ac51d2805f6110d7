package feed

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/store"
)

// countingStore counts the transactions that reach the store and can hold them until
// released, so a test decides when publishes arrive while one commits.
type countingStore struct {
	store.Store
	transacts atomic.Int64
	hold      chan struct{} // when set, each Transact waits until it is closed
}

func (c *countingStore) Transact(ctx context.Context, ws ...store.Write) error {
	c.transacts.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	return c.Store.Transact(ctx, ws...)
}

func openLogStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func stateWrite(paymentID string, cond store.Cond) store.Write {
	return store.Write{Table: "payments", Put: &store.Item{PK: "published#" + paymentID, Doc: []byte("{}"), Version: 1}, Cond: cond}
}

// TestPublishesThatArriveTogetherCommitTogether: 40 publishes arrive while the first one
// commits; they wait and commit as one batch (one transaction, not one each), and the feed
// holds all 41 at consecutive cursors, each once.
func TestPublishesThatArriveTogetherCommitTogether(t *testing.T) {
	cs := &countingStore{Store: openLogStore(t), hold: make(chan struct{})}
	log := &Log{Store: cs}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 41)
	publish := func(i int) {
		defer wg.Done()
		ev := Event{ID: fmt.Sprintf("change#pay_%d#1", i), PaymentID: fmt.Sprintf("pay_%d", i)}
		errs <- log.Publish(ctx, ev, stateWrite(ev.PaymentID, store.Cond{Kind: store.NotExists}))
	}
	wg.Add(1)
	go publish(0)
	for cs.transacts.Load() == 0 { // the first publish is committing (held)
		waitTurn()
	}
	wg.Add(40)
	for i := 1; i <= 40; i++ {
		go publish(i)
	}
	for queued(log) < 40 {
		waitTurn()
	}
	close(cs.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.transacts.Load(); n != 2 {
		t.Fatalf("%d transactions for 41 publishes, want 2 (the first, then the 40 that waited)", n)
	}
	evs, err := log.Read(ctx, 0, 100)
	if err != nil || len(evs) != 41 {
		t.Fatalf("%d events (%v), want 41", len(evs), err)
	}
	seen := map[string]bool{}
	for i, ev := range evs {
		if ev.Cursor != strconv.Itoa(i+1) || seen[ev.ID] {
			t.Fatalf("event %d: cursor %s, id %s (seen before: %v)", i, ev.Cursor, ev.ID, seen[ev.ID])
		}
		seen[ev.ID] = true
	}
}

// TestABatchKeepsItsOthersWhenOneStateFails: in one batch, a publish whose publication state
// fails its condition gets that failure; the others are published at consecutive cursors, and
// two publishes of one payment's state go in two transactions, in the order they came.
func TestABatchKeepsItsOthersWhenOneStateFails(t *testing.T) {
	st := openLogStore(t)
	ctx := context.Background()
	if err := st.Put(ctx, "payments", store.Item{PK: "published#pay_taken", Doc: []byte("{}")}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	log := &Log{Store: st}
	// Queued as a leader would find them: the failing one in the middle, pay_2 twice.
	var ps []*publish
	for _, id := range []string{"pay_1", "pay_taken", "pay_2", "pay_2", "pay_3"} {
		ps = append(ps, &publish{ev: Event{ID: "change#" + id, PaymentID: id},
			st: stateWrite(id, store.Cond{Kind: store.NotExists}), done: make(chan error, 1)})
	}
	ps[3].st.Cond = store.Cond{} // pay_2's state again, unconditionally: the next transaction
	log.queue = ps
	log.committing = true
	log.lead(ctx, &publish{done: make(chan error, 1)})
	for i, p := range ps {
		err := <-p.done
		var ce *store.ConditionError
		switch {
		case i == 1 && (!errors.As(err, &ce) || ce.Index != 2):
			t.Errorf("the taken state: %v, want a condition failure on write 2", err)
		case i != 1 && err != nil:
			t.Errorf("publish %d: %v", i, err)
		}
	}
	evs, err := log.Read(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Cursor+":"+ev.PaymentID)
	}
	if want := "[1:pay_1 2:pay_2 3:pay_3 4:pay_2]"; fmt.Sprint(got) != want {
		t.Fatalf("feed %v, want %s", got, want)
	}
}

// waitTurn lets the other goroutines run while a test waits for a condition.
func waitTurn() { runtime.Gosched() }

func queued(l *Log) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}
