package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/store"
)

func TestCheckpointCommitsWithTheKeyAndIsFenced(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		c := newClock()
		k := newKeeper(t, s, c)
		fp := FingerprintBytes([]byte(`{"amount":300}`))
		out, err := k.Acquire(ctx, "local", "refund-1", fp)
		if err != nil || out.Kind != New {
			t.Fatalf("acquire: %v %v", out.Kind, err)
		}
		reserve := func(pk string) store.Write {
			return store.Write{Table: "payments", Put: &store.Item{PK: pk, Doc: []byte(`{}`)}, Cond: store.Cond{Kind: store.NotExists}}
		}
		if err := k.Checkpoint(ctx, out.Lease, reserve("r1")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "payments", "r1", ""); err != nil {
			t.Fatalf("the checkpoint's effect is not stored: %v", err)
		}
		// The key is still held: a repeat is in progress, not new.
		if again, err := k.Acquire(ctx, "local", "refund-1", fp); err != nil || again.Kind != InProgress {
			t.Fatalf("repeat after the checkpoint: %v %v", again.Kind, err)
		}
		// An effect whose condition fails commits nothing and keeps the lease.
		var ce *store.ConditionError
		if err := k.Checkpoint(ctx, out.Lease, reserve("r1")); !errors.As(err, &ce) || ce.Index != 0 {
			t.Fatalf("failed effect: %v", err)
		}
		if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(`{}`)}); err != nil {
			t.Fatalf("complete after checkpoints: %v", err)
		}

		// A holder whose lock expired and was taken over can no longer checkpoint.
		old, err := k.Acquire(ctx, "local", "refund-2", fp)
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		if _, err := k.Acquire(ctx, "local", "refund-2", fp); err != nil {
			t.Fatal(err)
		}
		if err := k.Checkpoint(ctx, old.Lease, reserve("r2")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("checkpoint of a lost lease: %v", err)
		}
		if _, err := s.Get(ctx, "payments", "r2", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a lost lease's effect was stored: %v", err)
		}
	})
}
