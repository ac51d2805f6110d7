package idempotency

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// counting counts the calls that reach a store.
type counting struct {
	store.Store
	n atomic.Int64
}

func (c *counting) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, table, pk, sk)
}

func (c *counting) Put(ctx context.Context, table string, it store.Item, cond store.Cond) error {
	c.n.Add(1)
	return c.Store.Put(ctx, table, it, cond)
}

func (c *counting) Replace(ctx context.Context, table string, it store.Item, cond store.Cond) (*store.Item, error) {
	c.n.Add(1)
	return c.Store.Replace(ctx, table, it, cond)
}

func (c *counting) Transact(ctx context.Context, ws ...store.Write) error {
	c.n.Add(1)
	return c.Store.Transact(ctx, ws...)
}

// The cache serves completed records without a store call, refuses another request from it,
// forgets a record when it expires, holds at most n, and is off by default.
func TestCacheOfCompletedRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		cs := &counting{Store: s}
		k, err := NewKeeper(Keeper{Store: cs, Now: clock.Now, Log: quiet, CacheSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		f := fp(t, `{"a":1}`)
		complete := func(key string) {
			out, err := k.Acquire(ctx, "local", key, f)
			if err != nil || out.Kind != New {
				t.Fatal(key, out.Kind, err)
			}
			if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(key)}); err != nil {
				t.Fatal(err)
			}
		}
		complete("a")
		cs.n.Store(0)
		for range 3 {
			out, err := k.Acquire(ctx, "local", "a", f)
			if err != nil || out.Kind != Replay || string(out.Response.Body) != "a" {
				t.Fatal(out.Kind, err)
			}
		}
		if mm, _ := k.Acquire(ctx, "local", "a", fp(t, `{"a":2}`)); mm.Kind != Mismatch || fmt.Sprint(mm.Fields) != "[a]" {
			t.Fatalf("mismatch from the cache: %+v", mm)
		}
		if lk, _ := k.Lookup(ctx, "local", "a"); lk.Kind != Replay {
			t.Fatal(lk.Kind)
		}
		if n := cs.n.Load(); n != 0 {
			t.Fatalf("%d store calls for cached replays", n)
		}
		// Bounded: the least recently used goes.
		complete("b")
		complete("c")
		if n := k.cache.len(); n != 2 {
			t.Fatalf("cache holds %d", n)
		}
		cs.n.Store(0)
		if out, _ := k.Acquire(ctx, "local", "a", f); out.Kind != Replay || cs.n.Load() != 1 {
			t.Fatalf("evicted record: %v after %d calls", out.Kind, cs.n.Load())
		}
		// Off by default: every replay is a store call.
		plain := &counting{Store: s}
		k2, _ := NewKeeper(Keeper{Store: plain, Now: clock.Now, Log: quiet})
		if out, _ := k2.Acquire(ctx, "local", "c", f); out.Kind != Replay || plain.n.Load() != 1 || k2.cache != nil {
			t.Fatalf("no cache: %v, %d calls", out.Kind, plain.n.Load())
		}
		// Expiring with the record: after retention the key runs afresh.
		clock.Advance(7*24*time.Hour + 2*time.Second)
		if out, _ := k.Acquire(ctx, "local", "b", f); out.Kind != New {
			t.Fatalf("expired record served from the cache: %v", out.Kind)
		}

	})
}
