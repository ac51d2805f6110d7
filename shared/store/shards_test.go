package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// fill puts n items spread over sh, with index sort keys in id order, and returns the keys.
func fill(t *testing.T, st store.Store, sh store.Shards, n int) []string {
	t.Helper()
	var want []string
	for i := range n {
		id := fmt.Sprintf("m%04d", i)
		it := store.Item{PK: id, Doc: []byte(`{}`), IndexPK: sh.Of(id), IndexSK: fmt.Sprintf("%04d#%s", n-i, id)}
		if err := st.Put(context.Background(), "t", it, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, it.IndexSK)
	}
	slices.Sort(want)
	return want
}

func open(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Items spread over the shards come back as one partition in sort-key order, across more pages
// of each shard than one, and every shard is used.
func TestShardsWalkMergesInOrder(t *testing.T) {
	st, sh := open(t), store.Shards{Base: "due", N: 8}
	want := fill(t, st, sh, 500)
	used := map[string]int{}
	var got []string
	err := sh.Walk(context.Background(), st, store.Query{Table: "t", Limit: 7}, func(it store.Item) bool {
		used[it.IndexPK]++
		got = append(got, it.IndexSK)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d items out of order or incomplete (want %d)", len(got), len(want))
	}
	if len(used) != sh.N {
		t.Fatalf("items in %d shards, want %d: %v", len(used), sh.N, used)
	}
	for p, n := range used {
		if !sh.Holds(p) || n < 7 { // several pages of 7 in each shard
			t.Fatalf("shard %s: %d items", p, n)
		}
	}
	// Bounds and an early stop.
	var bounded []string
	_ = sh.Walk(context.Background(), st, store.Query{Table: "t", SKFrom: want[100], SKTo: want[199], Limit: 3}, func(it store.Item) bool {
		bounded = append(bounded, it.IndexSK)
		return len(bounded) < 50
	})
	if !slices.Equal(bounded, want[100:150]) {
		t.Fatalf("bounded walk: %v", bounded)
	}
}

// Page walks the logical partition page by page with its own cursor: every item once, in order.
func TestShardsPage(t *testing.T) {
	st, sh := open(t), store.Shards{Base: "running", N: 5}
	want := fill(t, st, sh, 103)
	var got []string
	cursor, pages := "", 0
	for {
		p, err := sh.Page(context.Background(), st, "t", 10, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range p.Items {
			got = append(got, it.IndexSK)
		}
		if cursor = p.Cursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) || pages != 11 {
		t.Fatalf("%d pages, %d items; want 11 pages of the %d in order", pages, len(got), len(want))
	}
}

func TestShardsOf(t *testing.T) {
	sh := store.Shards{Base: "x", N: 32}
	if sh.Of("a") != sh.Of("a") || !sh.Holds(sh.Of("a")) || sh.Holds("x#32") || sh.Holds("x") {
		t.Fatal("Of is not stable or Holds is wrong")
	}
	if got := sh.Partitions(); len(got) != 32 || got[0] != "x#00" || got[31] != "x#31" {
		t.Fatalf("partitions %v", got)
	}
}

// A walk reads its shards' first pages side by side, at most WalkReaders at once, and still
// merges in order. One after another, a reconciliation's walks over several days of 64
// partitions each added up their throttled calls' backoffs past a request's deadline.
func TestShardsWalkReadsFirstPagesSideBySide(t *testing.T) {
	base, sh := open(t), store.Shards{Base: "day", N: 64}
	want := fill(t, base, sh, 300)
	st := storetest.NewGate(base, store.WalkReaders, nil)
	// Bounded so that a walk reading one shard at a time fails here instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	err := sh.Walk(ctx, st, store.Query{Table: "t", Limit: 3}, func(it store.Item) bool {
		got = append(got, it.IndexSK)
		return true
	})
	if err != nil {
		t.Fatalf("walk: %v (most queries in flight: %d, want %d)", err, st.Most(), store.WalkReaders)
	}
	if st.Most() != store.WalkReaders {
		t.Errorf("at most %d queries in flight, want %d", st.Most(), store.WalkReaders)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d items out of order or incomplete (want %d)", len(got), len(want))
	}
}
