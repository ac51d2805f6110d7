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
type Log struct {
	Store store.Store

	mu     sync.Mutex
	notify chan struct{}
}

var _ Sink = (*Log)(nil)

// Publish implements Sink: the entry, the counter and the publication state in one transaction.
func (l *Log) Publish(ctx context.Context, ev Event, st store.Write) error {
	for range 10 {
		last, err := l.last(ctx)
		if err != nil {
			return err
		}
		n := last + 1
		ev.Cursor = strconv.FormatInt(n, 10)
		doc, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		counter := store.Write{Table: Table, Put: &store.Item{PK: counterPK, SK: "-", Doc: []byte("{}"), Version: n},
			Cond: store.Cond{Kind: store.VersionIs, Version: last}}
		if last == 0 {
			counter.Cond = store.Cond{Kind: store.NotExists}
		}
		entry := store.Write{Table: Table, Put: &store.Item{PK: entriesPK, SK: cursorKey(n), Doc: doc}, Cond: store.Cond{Kind: store.NotExists}}
		err = l.Store.Transact(ctx, counter, entry, st)
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index < 2 {
			continue // another publisher took the cursor: take the next
		}
		if err != nil {
			return err
		}
		l.wake()
		return nil
	}
	return errors.New("feed: the cursor kept moving; try again")
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
