package storetest

import (
	"context"
	"sync"

	"github.com/runtwice/twice/shared/store"
)

// Gate is a store whose chosen reads (Get and Query) wait until Want of them are in flight at
// once, for a test of code that should read side by side: read one at a time, the first read
// waits until its context ends. Most reports the most that ever were in flight.
//
//	g := storetest.NewGate(st, 8, nil)
//	err := code(ctx, g) // ctx bounded: a serial reader fails instead of hanging
//	if g.Most() != 8 { ... }
type Gate struct {
	store.Store
	want  int
	holds func(table, pk string) bool

	mu        sync.Mutex
	now, most int
	opened    bool
	gate      chan struct{}
}

// NewGate wraps st. holds chooses the reads that wait (nil: every read).
func NewGate(st store.Store, want int, holds func(table, pk string) bool) *Gate {
	return &Gate{Store: st, want: want, holds: holds, gate: make(chan struct{})}
}

// Most is the most chosen reads that were in flight at once.
func (g *Gate) Most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

func (g *Gate) wait(ctx context.Context, table, pk string) error {
	if g.holds != nil && !g.holds(table, pk) {
		return nil
	}
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	if g.now == g.want && !g.opened {
		g.opened = true
		close(g.gate)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get implements store.Store.
func (g *Gate) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	if err := g.wait(ctx, table, pk); err != nil {
		return store.Item{}, err
	}
	return g.Store.Get(ctx, table, pk, sk)
}

// Query implements store.Store.
func (g *Gate) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := g.wait(ctx, q.Table, q.PK); err != nil {
		return store.Page{}, err
	}
	return g.Store.Query(ctx, q)
}
