// Package idempotencytest is the contract suite of package idempotency's stores: what a
// store.Store must do for a Keeper to keep its promises (one winner per key, the key and its
// effect in one transaction, fencing after a takeover, the first try handed on, pending keys
// resumed once at a time, expiry). Twice runs it against DynamoDB (shared/dynamo, in both
// attribute layouts) and the embedded bbolt store (shared/boltstore); the author of another
// store runs it against theirs:
//
//	func TestIdempotencyContract(t *testing.T) {
//		idempotencytest.Run(t, func(t testing.TB) store.Store { return newMyStore(t) })
//	}
//
// The store newStore returns must hold two logical tables keyed by PK alone: idempotency.Table
// and EffectTable. Each case gets a fresh store.
package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/store"
)

// EffectTable is the logical table the suite's effects are written to.
const EffectTable = "payments"

// Clock is a settable clock; the suite never reads the wall clock for its rules.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock on.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type env struct {
	t     *testing.T
	s     store.Store
	clock *Clock
	k     *idempotency.Keeper
	ctx   context.Context
}

func (e *env) fp(body string) idempotency.Fingerprint {
	f, err := idempotency.FingerprintJSON([]byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) acquire(key, body string, want idempotency.Kind) idempotency.Outcome {
	e.t.Helper()
	out, err := e.k.Acquire(e.ctx, "contract", key, e.fp(body))
	if err != nil || out.Kind != want {
		e.t.Fatalf("acquire %s %s: %v %v, want %v", key, body, out.Kind, err, want)
	}
	return out
}

func effect(id string, c store.CondKind) store.Write {
	return store.Write{Table: EffectTable, Put: &store.Item{PK: id, Doc: []byte(`{"id":"` + id + `"}`)}, Cond: store.Cond{Kind: c}}
}

// Run runs every case of the contract, each on a fresh store from newStore, with the Keeper's
// in-process cache off and on (the cache must never change an answer).
func Run(t *testing.T, newStore func(t testing.TB) store.Store) {
	for _, cached := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if cached {
				name += "/cached"
			}
			t.Run(name, func(t *testing.T) {
				clock := NewClock()
				s := newStore(t)
				spec := idempotency.Keeper{Store: s, Now: clock.Now, Log: slog.New(slog.DiscardHandler)}
				if cached {
					spec.CacheSize = 64
				}
				k, err := idempotency.NewKeeper(spec)
				if err != nil {
					t.Fatal(err)
				}
				c.run(&env{t: t, s: s, clock: clock, k: k, ctx: context.Background()})
			})
		}
	}
}

var cases = []struct {
	name string
	run  func(e *env)
}{
	{"lifecycle", func(e *env) {
		out := e.acquire("k", `{"amount":1}`, idempotency.New)
		e.acquire("k", `{"amount":1}`, idempotency.InProgress)
		if mm := e.acquire("k", `{"amount":2}`, idempotency.Mismatch); fmt.Sprint(mm.Fields) != "[amount]" {
			e.t.Fatalf("mismatch names %v", mm.Fields)
		}
		resp := idempotency.Response{Status: 201, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"id":"p1"}`)}
		if err := e.k.Complete(e.ctx, out.Lease, resp, effect("p1", store.NotExists)); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.s.Get(e.ctx, EffectTable, "p1", ""); err != nil {
			e.t.Fatalf("effect: %v", err)
		}
		rep := e.acquire("k", `{"amount":1}`, idempotency.Replay)
		if rep.Response.Status != 201 || string(rep.Response.Body) != `{"id":"p1"}` || rep.Response.Header["Content-Type"] != "application/json" {
			e.t.Fatalf("replay %+v", rep.Response)
		}
		e.acquire("k", `{"amount":2}`, idempotency.Mismatch)
		if err := e.k.Complete(e.ctx, out.Lease, resp); !errors.Is(err, idempotency.ErrLeaseLost) {
			e.t.Fatalf("second complete: %v", err)
		}
		e.clock.Advance(7*24*time.Hour + 2*time.Second)
		e.acquire("k", `{"amount":2}`, idempotency.New)
	}},
	{"effect and key commit together or not at all", func(e *env) {
		out := e.acquire("k", `{}`, idempotency.New)
		if err := e.s.Put(e.ctx, EffectTable, store.Item{PK: "taken", Doc: []byte(`{}`)}, store.Cond{}); err != nil {
			e.t.Fatal(err)
		}
		err := e.k.Complete(e.ctx, out.Lease, idempotency.Response{Status: 201}, effect("fresh", store.NotExists), effect("taken", store.NotExists))
		var ce *store.ConditionError
		if !errors.As(err, &ce) || ce.Index != 1 || ce.Old == nil || ce.Old.PK != "taken" {
			e.t.Fatalf("got %v, want the condition error of effect 1 with the item as it was", err)
		}
		if _, err := e.s.Get(e.ctx, EffectTable, "fresh", ""); !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal("half a transaction committed")
		}
		e.acquire("k", `{}`, idempotency.InProgress)
		if err := e.k.Complete(e.ctx, out.Lease, idempotency.Response{Status: 201}, effect("fresh", store.NotExists)); err != nil {
			e.t.Fatalf("the lease survives a failed effect: %v", err)
		}
	}},
	{"release commits its effect and frees the key", func(e *env) {
		out := e.acquire("k", `{}`, idempotency.New)
		if err := e.k.Release(e.ctx, out.Lease, effect("r", store.Always)); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.s.Get(e.ctx, EffectTable, "r", ""); err != nil {
			e.t.Fatalf("release effect: %v", err)
		}
		e.acquire("k", `{}`, idempotency.New)
	}},
	{"takeover fences the old holder and keeps the first try", func(e *env) {
		t0 := e.clock.Now()
		first := e.acquire("k", `{"a":1}`, idempotency.New)
		e.clock.Advance(31 * time.Second)
		e.acquire("k", `{"a":2}`, idempotency.Mismatch) // a holder that died may have charged
		second := e.acquire("k", `{"a":1}`, idempotency.New)
		if !second.TakenOver || !second.Lease.FirstTried.Equal(t0) {
			e.t.Fatalf("takeover %+v, first tried %s, want %s", second, second.Lease.FirstTried, t0)
		}
		if err := e.k.Complete(e.ctx, first.Lease, idempotency.Response{Status: 201}, effect("old", store.Always)); !errors.Is(err, idempotency.ErrLeaseLost) {
			e.t.Fatalf("fenced holder completed: %v", err)
		}
		if _, err := e.s.Get(e.ctx, EffectTable, "old", ""); !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal("the fenced holder's effect committed")
		}
		if err := e.k.Complete(e.ctx, second.Lease, idempotency.Response{Status: 201, Body: []byte(`"second"`)}); err != nil {
			e.t.Fatal(err)
		}
		if rep := e.acquire("k", `{"a":1}`, idempotency.Replay); string(rep.Response.Body) != `"second"` {
			e.t.Fatalf("replay %s", rep.Response.Body)
		}
	}},
	{"pending key is resumed once at a time from its request", func(e *env) {
		out := e.acquire("k", `{"a":1}`, idempotency.New)
		if err := e.k.Pend(e.ctx, out.Lease, idempotency.Response{Status: 202}, []byte(`{"a":1}`), effect("pend", store.NotExists)); err != nil {
			e.t.Fatal(err)
		}
		e.acquire("k", `{"a":2}`, idempotency.Mismatch)
		e.clock.Advance(time.Hour) // a pending key is never taken over, however long it waits
		p := e.acquire("k", `{"a":1}`, idempotency.Pending)
		if string(p.Request) != `{"a":1}` || p.Response.Status != 202 {
			e.t.Fatalf("pending %+v", p)
		}
		l, err := e.k.Resume(e.ctx, p)
		if err != nil || string(l.Request) != `{"a":1}` || l.Tries != 1 || !l.FirstTried.Before(l.AcquiredAt) {
			e.t.Fatalf("resume %+v %v", l, err)
		}
		if _, err := e.k.Resume(e.ctx, p); !errors.Is(err, idempotency.ErrLeaseLost) {
			e.t.Fatalf("second resumer: %v", err)
		}
		if again := e.acquire("k", `{"a":1}`, idempotency.Pending); !again.Resolving {
			e.t.Fatal("a repeat during the resumption does not see it resolving")
		}
		if err := e.k.Complete(e.ctx, l, idempotency.Response{Status: 201, Body: []byte(`"done"`)}); err != nil {
			e.t.Fatal(err)
		}
		if rep := e.acquire("k", `{"a":1}`, idempotency.Replay); string(rep.Response.Body) != `"done"` {
			e.t.Fatalf("replay %s", rep.Response.Body)
		}
	}},
	{"typed Do round-trips its result", func(e *env) {
		type result struct {
			ID    string            `json:"id"`
			Lines map[string]int    `json:"lines"`
			Meta  map[string]string `json:"meta,omitempty"`
		}
		runs := 0
		op := func(ctx context.Context) (result, error) {
			runs++
			return result{ID: "r1", Lines: map[string]int{"a": 1, "b": 2}}, nil
		}
		f := e.fp(`{"cart":1}`)
		first, _, err := idempotency.Do(e.ctx, e.k, "contract", "typed", f, op)
		if err != nil {
			e.t.Fatal(err)
		}
		again, out, err := idempotency.Do(e.ctx, e.k, "contract", "typed", f, op)
		if err != nil || out.Kind != idempotency.Replay || fmt.Sprint(again) != fmt.Sprint(first) || runs != 1 {
			e.t.Fatalf("%+v %v %v (%d runs)", again, out.Kind, err, runs)
		}
	}},
	{"one winner among concurrent acquires", func(e *env) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		kinds := map[idempotency.Kind]int{}
		for range 20 {
			wg.Go(func() {
				out, err := e.k.Acquire(e.ctx, "contract", "race", e.fp(`{}`))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					e.t.Error(err)
				}
				kinds[out.Kind]++
			})
		}
		wg.Wait()
		if kinds[idempotency.New] != 1 || kinds[idempotency.InProgress] != 19 {
			e.t.Fatalf("outcomes %v", kinds)
		}
	}},
}
