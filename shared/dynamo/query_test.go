package dynamo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// collect pages through a query and fails if a page is over the limit or the walk does not end.
func collect(t *testing.T, s *Store, q store.Query) (keys []string, pages int) {
	t.Helper()
	for {
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		p, err := s.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if q.Limit > 0 && len(p.Items) > q.Limit {
			t.Fatalf("page of %d over limit %d", len(p.Items), q.Limit)
		}
		for _, it := range p.Items {
			keys = append(keys, it.PK+"/"+it.SK)
		}
		if q.Cursor = p.Cursor; q.Cursor == "" {
			return keys, pages
		}
	}
}

// TestQueryPages covers what the contract suite leaves to DynamoDB's Limit: a partition whose
// size is a multiple of the page ends without an empty extra page, index queries page through
// their own key, and a page cut by DynamoDB's 1 MB cap continues where it stopped.
func TestQueryPages(t *testing.T) {
	client := NewClient(testEndpoint(t))
	s := New(client, newTables(t, client, storetest.Sorted))
	ctx := context.Background()
	for i := range 10 {
		it := store.Item{PK: "p", SK: fmt.Sprintf("%02d", i), Version: 1, IndexPK: "ix", IndexSK: fmt.Sprintf("%02d", 9-i)}
		if err := s.Put(ctx, storetest.Sorted, it, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("x"), 300_000)
	for i := range 5 {
		if err := s.Put(ctx, storetest.Sorted, store.Item{PK: "big", SK: fmt.Sprint(i), Doc: big}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		q         store.Query
		wantN     int
		wantPages int
		wantFirst string
	}{
		{"exact multiple", store.Query{PK: "p", Limit: 5}, 10, 2, "p/00"},
		{"exact multiple desc", store.Query{PK: "p", Limit: 5, Desc: true}, 10, 2, "p/09"},
		{"one page", store.Query{PK: "p", Limit: 10}, 10, 1, "p/00"},
		{"uneven", store.Query{PK: "p", Limit: 3}, 10, 4, "p/00"},
		{"index", store.Query{Index: true, PK: "ix", Limit: 4}, 10, 3, "p/09"},
		{"index desc", store.Query{Index: true, PK: "ix", Limit: 4, Desc: true}, 10, 3, "p/00"},
		{"index range", store.Query{Index: true, PK: "ix", SKFrom: "03", SKTo: "06", Limit: 2}, 4, 2, "p/06"},
		// Three 300 KB items fill DynamoDB's 1 MB page, so pages are cut before the limit.
		{"1 MB cap", store.Query{PK: "big", Limit: 10}, 5, 2, "big/0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Table = storetest.Sorted
			keys, pages := collect(t, s, q)
			if len(keys) != tc.wantN || pages != tc.wantPages || keys[0] != tc.wantFirst {
				t.Fatalf("got %d items in %d pages starting %s, want %d in %d starting %s: %v",
					len(keys), pages, keys[0], tc.wantN, tc.wantPages, tc.wantFirst, keys)
			}
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Fatalf("%s returned twice: %v", k, keys)
				}
				seen[k] = true
			}
		})
	}
}

// TestConditionsAgreeWithHolds checks DynamoDB's evaluation of every condition expression
// against store.Cond.Holds on random items, lock and TTL values around now, and versions
// around the stored one: the two stores must agree on what a condition means.
func TestConditionsAgreeWithHolds(t *testing.T) {
	client := NewClient(testEndpoint(t))
	s := New(client, newTables(t, client, storetest.Simple))
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		pk := fmt.Sprintf("k%d", n)
		const now = 1_000_000
		near := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(now-2, now+2))
		var cur *store.Item
		if rapid.Bool().Draw(rt, "exists") {
			cur = &store.Item{PK: pk, Doc: []byte(`"old"`), Version: rapid.Int64Range(-2, 2).Draw(rt, "ver"),
				LockExpiresAt: near.Draw(rt, "lock"), ExpiresAt: near.Draw(rt, "exp")}
			if err := s.Put(ctx, storetest.Simple, *cur, store.Cond{}); err != nil {
				rt.Fatal(err)
			}
		}
		c := store.Cond{
			Kind:    store.CondKind(rapid.IntRange(int(store.Always), int(store.VersionIs)).Draw(rt, "kind")),
			Now:     now,
			Version: rapid.Int64Range(-2, 2).Draw(rt, "cver"),
		}
		err := s.Put(ctx, storetest.Simple, store.Item{PK: pk, Doc: []byte(`"new"`)}, c)
		if want := c.Holds(cur); want != (err == nil) {
			rt.Fatalf("Holds=%v, DynamoDB: %v (item %+v, cond %+v)", want, err, cur, c)
		}
		if err != nil && !errors.Is(err, store.ErrConditionFailed) {
			rt.Fatal(err)
		}
	})
}
