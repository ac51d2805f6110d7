package idempotency

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// An unknown outcome keeps the key: the request bytes and fingerprint stay, a different body is
// a mismatch, the same body resumes it (once at a time) from the stored bytes, and a resumption
// that completes turns every later repeat into a replay of the final answer.
func TestPendingKeyLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		k := newKeeper(t, s, clock)
		body := `{"amount":100,"metadata":{}}`
		req := fp(t, body)

		out, err := k.Acquire(ctx, "local", "p", req)
		if err != nil || out.Kind != New {
			t.Fatal(out.Kind, err)
		}
		interim := Response{Status: 202, Body: []byte(`{"status":"pending"}`)}
		if err := k.Pend(ctx, out.Lease, interim, []byte(body)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(25 * time.Hour)

		if mm, _ := k.Acquire(ctx, "local", "p", fp(t, `{"amount":200,"metadata":{}}`)); mm.Kind != Mismatch || fmt.Sprint(mm.Fields) != "[amount]" {
			t.Fatalf("different body on a pending key: %+v", mm)
		}
		// Key order and spacing do not make a different request.
		same, err := k.Acquire(ctx, "local", "p", fp(t, `{ "metadata":{}, "amount":100 }`))
		if err != nil || same.Kind != Pending || string(same.Response.Body) != `{"status":"pending"}` ||
			string(same.Request) != body || same.Resolving {
			t.Fatalf("same body on a pending key: %+v, %v", same, err)
		}
		l, err := k.Resume(ctx, same)
		if err != nil {
			t.Fatal(err)
		}
		if string(l.Request) != body || !l.FirstTried.Equal(newClock().Now()) || l.Tries != 1 {
			t.Fatalf("resumed lease %+v", l)
		}
		// While one caller resumes it, others see it resolving, and cannot resume it too.
		busy, _ := k.Acquire(ctx, "local", "p", req)
		if busy.Kind != Pending || !busy.Resolving || !busy.LockExpiresAt.Equal(clock.Now().Add(30*time.Second)) ||
			busy.RetryAfter != 2*time.Second {
			t.Fatalf("while resolving: %+v", busy)
		}
		if _, err := k.Resume(ctx, same); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("second resume of one read: %v", err)
		}
		// Released (the provider was busy): pending again, as it was, resumable.
		if err := k.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		again, _ := k.Acquire(ctx, "local", "p", req)
		if again.Kind != Pending || again.Resolving || string(again.Request) != body {
			t.Fatalf("after release of a resumption: %+v", again)
		}
		l, err = k.Resume(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		final := Response{Status: 201, Body: []byte(`{"status":"succeeded"}`)}
		if err := k.Complete(ctx, l, final); err != nil {
			t.Fatal(err)
		}
		rep, _ := k.Acquire(ctx, "local", "p", req)
		if rep.Kind != Replay || string(rep.Response.Body) != `{"status":"succeeded"}` {
			t.Fatalf("after resolution: %+v", rep)
		}
		if look, _ := k.Lookup(ctx, "local", "p"); look.Kind != Replay {
			t.Fatalf("lookup after resolution: %v", look.Kind)
		}
		if none, _ := k.Lookup(ctx, "local", "never"); none.Kind != New {
			t.Fatalf("lookup of an unknown key: %v", none.Kind)
		}
	})
}

// A resolver that died holding a pending key does not hold it for ever: its lock lapses and
// the next repeat resumes it. The key itself is never taken over by Acquire.
func TestPendingResolverLockLapses(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		k := newKeeper(t, s, clock)
		req := fp(t, `{"amount":1}`)
		out, _ := k.Acquire(ctx, "local", "p", req)
		if err := k.Pend(ctx, out.Lease, Response{Status: 202}, []byte(`{"amount":1}`)); err != nil {
			t.Fatal(err)
		}
		look, err := k.Lookup(ctx, "local", "p")
		if err != nil || look.Kind != Pending {
			t.Fatal(look.Kind, err)
		}
		if _, err := k.Resume(ctx, look); err != nil {
			t.Fatal(err)
		}
		// The resolver crashes. Within its lock nobody resumes; after it, the next one does.
		clock.Advance(10 * time.Second)
		if o, _ := k.Acquire(ctx, "local", "p", req); !o.Resolving || !o.LockExpiresAt.Equal(clock.Now().Add(20*time.Second)) {
			t.Fatalf("within the lock: %+v", o)
		}
		if o, _ := k.Lookup(ctx, "local", "p"); !o.Resolving || !o.LockExpiresAt.Equal(clock.Now().Add(20*time.Second)) {
			t.Fatalf("looked up within the lock: %+v", o)
		}
		clock.Advance(time.Minute)
		o, _ := k.Acquire(ctx, "local", "p", req)
		if o.Kind != Pending || o.Resolving {
			t.Fatalf("after the lock: %+v", o)
		}
		if _, err := k.Resume(ctx, o); err != nil {
			t.Fatal(err)
		}
	})
}

// Do on a pending key runs the operation again from the stored request, under a lease that
// says when the first try was, and answers Replay once that resolves it.
func TestDoResumesAPendingKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		k := newKeeper(t, s, clock)
		req := fp(t, `{"amount":1}`)
		first, err := k.Run(ctx, "local", "d", req, func(context.Context, *Lease) (Result, error) {
			return Result{Response: Response{Status: 202, Body: []byte("pending")}, Pending: true, Request: []byte(`{"amount":1}`)}, nil
		})
		if err != nil || first.Kind != New || first.Response.Status != 202 {
			t.Fatalf("first: %+v %v", first, err)
		}
		clock.Advance(3 * time.Hour)
		var seen *Lease
		second, err := k.Run(ctx, "local", "d", fp(t, ` {"amount":1}`), func(_ context.Context, l *Lease) (Result, error) {
			seen = l
			return Result{Response: Response{Status: 201, Body: []byte("done")}, Final: true}, nil
		})
		if err != nil || second.Kind != Replay || !second.Resumed || string(second.Response.Body) != "done" {
			t.Fatalf("second: %+v %v", second, err)
		}
		if seen == nil || string(seen.Request) != `{"amount":1}` || clock.Now().Sub(seen.FirstTried) != 3*time.Hour {
			t.Fatalf("lease %+v", seen)
		}
		third, _ := k.Run(ctx, "local", "d", req, func(context.Context, *Lease) (Result, error) {
			t.Fatal("a completed key ran again")
			return Result{}, nil
		})
		if third.Kind != Replay || string(third.Response.Body) != "done" {
			t.Fatalf("third: %+v", third)
		}
	})
}
