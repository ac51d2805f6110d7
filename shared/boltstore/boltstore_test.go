package boltstore

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "twice.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A new file gets PageSize; a file made with another page size (the 4 KB of files created
// before PageSize) opens with its own and keeps its items.
func TestPageSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fresh, err := Open(filepath.Join(dir, "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fresh.DB().Info().PageSize; got != PageSize {
		t.Errorf("new file: page size %d, want %d", got, PageSize)
	}
	fresh.Close()

	old := filepath.Join(dir, "old.db")
	db, err := bolt.Open(old, 0o600, &bolt.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	s := New(db)
	if err := s.Put(ctx, "t", store.Item{PK: "a", SK: "1", Doc: []byte(`{"n":1}`)}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.DB().Info().PageSize; got != 4096 {
		t.Errorf("existing file: page size %d, want the 4096 it was made with", got)
	}
	it, err := s.Get(ctx, "t", "a", "1")
	if err != nil || string(it.Doc) != `{"n":1}` {
		t.Errorf("existing file's item: %q, %v", it.Doc, err)
	}
	if err := s.Put(ctx, "t", store.Item{PK: "a", SK: "2", Doc: []byte(`{"n":2}`)}, store.Cond{}); err != nil {
		t.Errorf("write to the existing file: %v", err)
	}
}

// Writes counts what commits: items per table, index entries apart (a rewrite of an indexed
// item deletes one entry and puts another), and nothing for a write whose condition failed.
func TestWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	step := func(name string, err error, want map[string]int64) {
		t.Helper()
		if err != nil && !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("%s: %v", name, err)
		}
		if got := s.Writes(); !maps.Equal(got, want) {
			t.Fatalf("after %s: %v, want %v", name, got, want)
		}
	}
	it := store.Item{PK: "pay_1", Doc: []byte(`{}`), IndexPK: "day#1", IndexSK: "a"}
	step("create", s.Put(ctx, "payments", it, store.Cond{Kind: store.NotExists}),
		map[string]int64{"payments": 1, "payments index": 1})
	step("duplicate create", s.Put(ctx, "payments", it, store.Cond{Kind: store.NotExists}),
		map[string]int64{"payments": 1, "payments index": 1})
	it.IndexSK = "b"
	step("rewrite", s.Put(ctx, "payments", it, store.Cond{}),
		map[string]int64{"payments": 2, "payments index": 3})
	step("batch", s.PutAll(ctx, "attempts", store.Item{PK: "a", Doc: []byte(`{}`)}, store.Item{PK: "b", Doc: []byte(`{}`)}),
		map[string]int64{"payments": 2, "payments index": 3, "attempts": 2})
	step("delete", s.Delete(ctx, "payments", "pay_1", "", store.Cond{}),
		map[string]int64{"payments": 3, "payments index": 4, "attempts": 2})
}
