package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Table is the local feed's table: the entries under one partition, sorted by cursor, and the
// cursor's counter.
const Table = "feed"

const (
	entriesPK  = "feed"
	counterPK  = "counter"
	cursorSize = 20
)

func cursorKey(n int64) string { return fmt.Sprintf("%0*d", cursorSize, n) }

// Log is a durable, resumable feed on a store: each event gets the next cursor in the same
// transaction as its payment's publication state, so a crash leaves it published once or not
// at all. Read and Wait serve GET /events?after=CURSOR.
//
// Cursors are consecutive and commit in their order: the counter item moves by a condition
// on its version. Publishes that arrive while one commits wait and then commit together, one
// transaction for up to maxBatch of them (a leader commits for the followers, as a group
// commit does), so the counter holds the feed to one commit per batch, not per event.
type Log struct {
	Store store.Store

	mu     sync.Mutex
	notify chan struct{}
	// queue holds the publishes waiting for the next batch; committing says a leader is
	// committing batches.
	queue      []*publish
	committing bool
}

// publish is one Publish waiting for its batch.
type publish struct {
	ev   Event
	st   store.Write
	done chan error
}

// maxBatch is the most events one transaction publishes: each is two writes (its entry and
// its publication state) beside the counter, within a transaction's 100.
const maxBatch = 49

var _ Sink = (*Log)(nil)

// Publish implements Sink: the entry, the counter and the publication state in one transaction
// (shared with the publishes that arrived meanwhile). A failed condition on st is returned as
// the store's *store.ConditionError with Index 2, the position st has in a lone publish.
func (l *Log) Publish(ctx context.Context, ev Event, st store.Write) error {
	p := &publish{ev: ev, st: st, done: make(chan error, 1)}
	l.mu.Lock()
	l.queue = append(l.queue, p)
	lead := !l.committing
	l.committing = true
	l.mu.Unlock()
	if lead {
		// The followers' publishes are committed too: not cut short by this caller's end.
		l.lead(context.WithoutCancel(ctx), p)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lead commits batches until no publish is waiting, or until own is answered: then a new
// leader goes on with the rest, so no caller commits for others for longer than its own wait.
func (l *Log) lead(ctx context.Context, own *publish) {
	for {
		l.mu.Lock()
		batch := l.take()
		if len(batch) == 0 {
			l.committing = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		l.commit(ctx, batch)
		if len(own.done) > 0 {
			go l.lead(ctx, &publish{done: make(chan error, 1)})
			return
		}
	}
}

// take removes the next batch from the queue, in arrival order: at most maxBatch, and at most
// one publication state per item (a transaction writes an item once). Called with l.mu held.
func (l *Log) take() []*publish {
	var batch, rest []*publish
	keys := map[[2]string]bool{}
	for _, p := range l.queue {
		k := [2]string{p.st.Table, writeKey(p.st)}
		if len(batch) == maxBatch || keys[k] {
			rest = append(rest, p)
			continue
		}
		keys[k] = true
		batch = append(batch, p)
	}
	l.queue = rest
	return batch
}

func writeKey(w store.Write) string {
	if w.Put != nil {
		return w.Put.PK + "\x00" + w.Put.SK
	}
	if w.Delete != nil {
		return w.Delete.PK + "\x00" + w.Delete.SK
	}
	return ""
}

// commit publishes batch in one transaction, numbering it from the counter. A publish whose
// state's condition fails is answered with that failure and the rest are tried again; a moved
// counter (another Log on the store) means reading it again, at most 10 times.
func (l *Log) commit(ctx context.Context, batch []*publish) {
	answer := func(ps []*publish, err error) {
		for _, p := range ps {
			p.done <- err
		}
	}
	for moved := 0; len(batch) > 0; {
		last, err := l.last(ctx)
		if err != nil {
			answer(batch, err)
			return
		}
		n := last + int64(len(batch))
		counter := store.Write{Table: Table, Put: &store.Item{PK: counterPK, SK: "-", Doc: []byte("{}"), Version: n},
			Cond: store.Cond{Kind: store.VersionIs, Version: last}}
		if last == 0 {
			counter.Cond = store.Cond{Kind: store.NotExists}
		}
		ws := []store.Write{counter}
		for i, p := range batch {
			ev := p.ev
			ev.Cursor = strconv.FormatInt(last+1+int64(i), 10)
			doc, err := json.Marshal(ev)
			if err != nil {
				answer(batch, err)
				return
			}
			ws = append(ws, store.Write{Table: Table, Put: &store.Item{PK: entriesPK, SK: cursorKey(last + 1 + int64(i)), Doc: doc},
				Cond: store.Cond{Kind: store.NotExists}}, p.st)
		}
		err = l.Store.Transact(ctx, ws...)
		var ce *store.ConditionError
		switch {
		case err == nil:
			answer(batch, nil)
			l.wake()
			return
		case !errors.As(err, &ce):
			answer(batch, err)
			return
		case ce.Index > 0 && ce.Index%2 == 0: // a publication state (writes 2, 4, ...): that publish fails
			i := ce.Index/2 - 1
			batch[i].done <- &store.ConditionError{Index: 2, Old: ce.Old}
			batch = append(batch[:i:i], batch[i+1:]...)
		case moved < 10: // the counter or an entry: another Log took the cursor
			moved++
		default:
			answer(batch, errors.New("feed: the cursor kept moving; try again"))
			return
		}
	}
}

func (l *Log) last(ctx context.Context) (int64, error) {
	it, err := l.Store.Get(ctx, Table, counterPK, "-")
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return it.Version, nil
}

func (l *Log) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

func (l *Log) changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// Read returns up to limit events after cursor, oldest first.
func (l *Log) Read(ctx context.Context, after int64, limit int) ([]Event, error) {
	page, err := l.Store.Query(ctx, store.Query{Table: Table, PK: entriesPK, SKFrom: cursorKey(after + 1), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(page.Items))
	for _, it := range page.Items {
		var ev Event
		if err := json.Unmarshal(it.Doc, &ev); err != nil {
			return nil, fmt.Errorf("feed: entry %s: %w", it.SK, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// Wait is Read that waits up to wait for the first event after cursor (a long poll).
func (l *Log) Wait(ctx context.Context, after int64, limit int, wait time.Duration) ([]Event, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		ch := l.changed()
		evs, err := l.Read(ctx, after, limit)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ch:
		case <-t.C:
			return evs, nil
		case <-ctx.Done():
			return evs, nil
		}
	}
}
