package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/runtwice/twice/shared/store"
)

// The logical tables the suite uses.
const (
	Simple = "simple"
	Sorted = "sorted"
)

// Run runs the contract suite. newStore is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"RoundTrip", testRoundTrip},
		{"Conditions", testConditions},
		{"ConditionErrorCarriesOld", testConditionErrorCarriesOld},
		{"ReplaceReturnsTheReplacedItem", testReplace},
		{"Delete", testDelete},
		{"TransactAllOrNothing", testTransactAllOrNothing},
		{"TransactInvalid", testTransactInvalid},
		{"PutAll", testPutAll},
		{"PutAllInvalid", testPutAllInvalid},
		{"QueryRangeAndOrder", testQueryRangeAndOrder},
		{"QueryPagination", testQueryPagination},
		{"QueryIndex", testQueryIndex},
		{"ConcurrentCreateOneWinner", testConcurrentCreateOneWinner},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func item(pk, sk, doc string, version int64) store.Item {
	return store.Item{PK: pk, SK: sk, Doc: []byte(doc), Version: version}
}

func mustPut(t *testing.T, s store.Store, table string, it store.Item) {
	t.Helper()
	if err := s.Put(context.Background(), table, it, store.Cond{}); err != nil {
		t.Fatalf("put %s/%s: %v", it.PK, it.SK, err)
	}
}

func equalItem(a, b store.Item) bool {
	return a.PK == b.PK && a.SK == b.SK && bytes.Equal(a.Doc, b.Doc) && a.Version == b.Version &&
		a.LockExpiresAt == b.LockExpiresAt && a.ExpiresAt == b.ExpiresAt &&
		a.IndexPK == b.IndexPK && a.IndexSK == b.IndexSK
}

func testGetMissing(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.Get(ctx, Simple, "nope", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Simple: got %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, Sorted, "nope", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Sorted: got %v, want ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	full := store.Item{PK: "p1", Doc: []byte(`{"a":1,"b":"ü"}`), Version: 7, LockExpiresAt: 1700000000,
		ExpiresAt: 1800000000, IndexPK: "ix", IndexSK: "2026-01-01T00:00:00Z#p1"}
	sorted := full
	sorted.SK = "s1"
	for _, tc := range []struct {
		table string
		it    store.Item
	}{{Simple, full}, {Sorted, sorted}, {Simple, item("p2", "", `{}`, 0)}} {
		mustPut(t, s, tc.table, tc.it)
		got, err := s.Get(ctx, tc.table, tc.it.PK, tc.it.SK)
		if err != nil {
			t.Fatalf("%s get: %v", tc.table, err)
		}
		if !equalItem(got, tc.it) {
			t.Fatalf("%s round trip:\n got %+v\nwant %+v", tc.table, got, tc.it)
		}
	}
	// An unconditional put replaces the whole item, including attributes it no longer sets.
	mustPut(t, s, Simple, item("p1", "", `{"a":2}`, 8))
	got, _ := s.Get(ctx, Simple, "p1", "")
	if got.LockExpiresAt != 0 || got.ExpiresAt != 0 || got.IndexPK != "" || string(got.Doc) != `{"a":2}` {
		t.Fatalf("replace kept old attributes: %+v", got)
	}
}

func testConditions(t *testing.T, s store.Store) {
	ctx := context.Background()
	const now = 1000
	cases := []struct {
		name     string
		existing *store.Item
		cond     store.Cond
		want     bool
	}{
		{"NotExists/absent", nil, store.Cond{Kind: store.NotExists}, true},
		{"NotExists/present", &store.Item{}, store.Cond{Kind: store.NotExists}, false},
		{"Exists/absent", nil, store.Cond{Kind: store.Exists}, false},
		{"Exists/present", &store.Item{}, store.Cond{Kind: store.Exists}, true},
		{"Lapsed/absent", nil, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, true},
		{"Lapsed/held lock", &store.Item{LockExpiresAt: now + 1}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, false},
		{"Lapsed/lock at now", &store.Item{LockExpiresAt: now}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, false},
		{"Lapsed/expired lock", &store.Item{LockExpiresAt: now - 1}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, true},
		{"Lapsed/no lock, live", &store.Item{ExpiresAt: now + 10}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, false},
		{"Lapsed/expired item", &store.Item{ExpiresAt: now - 1}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, true},
		{"Lapsed/no lock, no ttl", &store.Item{}, store.Cond{Kind: store.NotExistsOrLapsed, Now: now}, false},
		{"VersionBelow/absent", nil, store.Cond{Kind: store.VersionBelow, Version: 3}, true},
		{"VersionBelow/older", &store.Item{Version: 2}, store.Cond{Kind: store.VersionBelow, Version: 3}, true},
		{"VersionBelow/same", &store.Item{Version: 3}, store.Cond{Kind: store.VersionBelow, Version: 3}, false},
		{"VersionBelow/newer", &store.Item{Version: 4}, store.Cond{Kind: store.VersionBelow, Version: 3}, false},
		{"VersionIs/absent", nil, store.Cond{Kind: store.VersionIs, Version: 0}, false},
		{"VersionIs/match", &store.Item{Version: 5}, store.Cond{Kind: store.VersionIs, Version: 5}, true},
		{"VersionIs/mismatch", &store.Item{Version: 6}, store.Cond{Kind: store.VersionIs, Version: 5}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, table := range []string{Simple, Sorted} {
				sk := ""
				if table == Sorted {
					sk = "s"
				}
				pk := fmt.Sprintf("c%d", i)
				if tc.existing != nil {
					e := *tc.existing
					e.PK, e.SK, e.Doc = pk, sk, []byte(`"old"`)
					mustPut(t, s, table, e)
				}
				if want := store.Cond.Holds(tc.cond, tc.existing); want != tc.want {
					t.Fatalf("Cond.Holds = %v, table says %v", want, tc.want)
				}
				err := s.Put(ctx, table, item(pk, sk, `"new"`, 9), tc.cond)
				if tc.want && err != nil {
					t.Fatalf("%s: put failed: %v", table, err)
				}
				if !tc.want && !errors.Is(err, store.ErrConditionFailed) {
					t.Fatalf("%s: got %v, want ErrConditionFailed", table, err)
				}
				got, gerr := s.Get(ctx, table, pk, sk)
				switch {
				case tc.want && string(got.Doc) != `"new"`:
					t.Fatalf("%s: after success doc %q (%v)", table, got.Doc, gerr)
				case !tc.want && tc.existing != nil && string(got.Doc) != `"old"`:
					t.Fatalf("%s: failed put changed the item: %q", table, got.Doc)
				case !tc.want && tc.existing == nil && !errors.Is(gerr, store.ErrNotFound):
					t.Fatalf("%s: failed put created an item: %v", table, gerr)
				}
			}
		})
	}
}

func testConditionErrorCarriesOld(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := store.Item{PK: "k", Doc: []byte(`{"status":"done"}`), Version: 3, ExpiresAt: 99, IndexPK: "i", IndexSK: "j"}
	mustPut(t, s, Simple, old)
	err := s.Put(ctx, Simple, item("k", "", `{}`, 4), store.Cond{Kind: store.NotExists})
	var ce *store.ConditionError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want *ConditionError", err)
	}
	if ce.Index != 0 || ce.Old == nil || !equalItem(*ce.Old, old) {
		t.Fatalf("condition error %+v, old %+v", ce, ce.Old)
	}
	// A condition on an absent item reports no old item.
	err = s.Put(ctx, Simple, item("absent", "", `{}`, 1), store.Cond{Kind: store.Exists})
	if !errors.As(err, &ce) || ce.Old != nil {
		t.Fatalf("absent: got %v old %+v", err, ce)
	}
	// Delete reports the old item too.
	err = s.Delete(ctx, Simple, "k", "", store.Cond{Kind: store.VersionIs, Version: 1})
	if !errors.As(err, &ce) || ce.Old == nil || ce.Old.Version != 3 {
		t.Fatalf("delete: got %v", err)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.Delete(ctx, Simple, "missing", "", store.Cond{}); err != nil {
		t.Fatalf("delete of a missing item: %v", err)
	}
	mustPut(t, s, Sorted, item("d", "1", `1`, 1))
	if err := s.Delete(ctx, Sorted, "d", "1", store.Cond{Kind: store.VersionIs, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, Sorted, "d", "1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func testTransactAllOrNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustPut(t, s, Simple, item("guard", "", `"v1"`, 1))
	mustPut(t, s, Sorted, item("gone", "1", `"x"`, 1))
	// Second write's condition fails: nothing is applied.
	err := s.Transact(ctx,
		store.Write{Table: Sorted, Put: ptr(item("effect", "1", `"charged"`, 1)), Cond: store.Cond{Kind: store.NotExists}},
		store.Write{Table: Simple, Put: ptr(item("guard", "", `"v2"`, 2)), Cond: store.Cond{Kind: store.VersionIs, Version: 9}},
		store.Write{Table: Sorted, Delete: &store.Key{PK: "gone", SK: "1"}},
	)
	var ce *store.ConditionError
	if !errors.As(err, &ce) || ce.Index != 1 || ce.Old == nil || ce.Old.Version != 1 {
		t.Fatalf("got %v (%+v), want condition error on write 1 with old version 1", err, ce)
	}
	if _, err := s.Get(ctx, Sorted, "effect", "1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed transaction applied its first write: %v", err)
	}
	if _, err := s.Get(ctx, Sorted, "gone", "1"); err != nil {
		t.Fatalf("failed transaction applied its delete: %v", err)
	}
	// All conditions hold: everything is applied.
	err = s.Transact(ctx,
		store.Write{Table: Sorted, Put: ptr(item("effect", "1", `"charged"`, 1)), Cond: store.Cond{Kind: store.NotExists}},
		store.Write{Table: Simple, Put: ptr(item("guard", "", `"v2"`, 2)), Cond: store.Cond{Kind: store.VersionIs, Version: 1}},
		store.Write{Table: Sorted, Delete: &store.Key{PK: "gone", SK: "1"}, Cond: store.Cond{Kind: store.Exists}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, Simple, "guard", ""); string(g.Doc) != `"v2"` {
		t.Fatalf("guard %q", g.Doc)
	}
	if _, err := s.Get(ctx, Sorted, "gone", "1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete not applied: %v", err)
	}
	if _, err := s.Get(ctx, Sorted, "effect", "1"); err != nil {
		t.Fatalf("effect missing: %v", err)
	}
}

func testTransactInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	cases := map[string][]store.Write{
		"empty":         nil,
		"duplicate key": {{Table: Simple, Put: ptr(item("a", "", `1`, 1))}, {Table: Simple, Delete: &store.Key{PK: "a"}}},
		"neither":       {{Table: Simple}},
		"both":          {{Table: Simple, Put: ptr(item("a", "", `1`, 1)), Delete: &store.Key{PK: "a"}}},
		"empty pk":      {{Table: Simple, Put: ptr(item("", "", `1`, 1))}},
	}
	for name, ws := range cases {
		if err := s.Transact(ctx, ws...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Get(ctx, Simple, "a", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invalid transaction wrote: %v", err)
	}
}

// testPutAll writes more items than one DynamoDB BatchWriteItem takes (25), over an item
// already there: every item is stored as given, the old one replaced whatever its version.
func testPutAll(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustPut(t, s, Sorted, item("log", "07", `"old"`, 5))
	var its []store.Item
	for i := range 60 {
		it := item("log", fmt.Sprintf("%02d", i), fmt.Sprintf(`{"n":%d}`, i), 0)
		it.ExpiresAt = 4102444800
		its = append(its, it)
	}
	if err := s.PutAll(ctx, Sorted, its...); err != nil {
		t.Fatal(err)
	}
	var got []store.Item
	cursor := ""
	for {
		p, err := s.Query(ctx, store.Query{Table: Sorted, PK: "log", Limit: 25, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Items...)
		if cursor = p.Cursor; cursor == "" {
			break
		}
	}
	if len(got) != len(its) {
		t.Fatalf("query found %d items, want %d", len(got), len(its))
	}
	for i, it := range got {
		if !equalItem(it, its[i]) {
			t.Fatalf("item %d: got %+v, want %+v", i, it, its[i])
		}
	}
}

func testPutAllInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	many := make([]store.Item, 101)
	for i := range many {
		many[i] = item("many", fmt.Sprintf("%03d", i), `1`, 0)
	}
	cases := map[string]struct {
		table string
		its   []store.Item
	}{
		"none":          {Sorted, nil},
		"over 100":      {Sorted, many},
		"duplicate key": {Sorted, []store.Item{item("a", "1", `1`, 0), item("b", "1", `1`, 0), item("a", "1", `2`, 0)}},
		"empty pk":      {Sorted, []store.Item{item("a", "1", `1`, 0), item("", "1", `1`, 0)}},
		"no table":      {"", []store.Item{item("a", "1", `1`, 0)}},
	}
	for name, tc := range cases {
		if err := s.PutAll(ctx, tc.table, tc.its...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	for _, pk := range []string{"a", "b", "many"} {
		if p, err := s.Query(ctx, store.Query{Table: Sorted, PK: pk}); err != nil || len(p.Items) != 0 {
			t.Fatalf("an invalid PutAll wrote under %q: %d items, %v", pk, len(p.Items), err)
		}
	}
}

func testQueryRangeAndOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, sk := range []string{"b", "a", "d", "c", "e", "ca"} {
		mustPut(t, s, Sorted, item("q", sk, `"`+sk+`"`, 1))
	}
	mustPut(t, s, Sorted, item("other", "c", `"x"`, 1))
	cases := []struct {
		name string
		q    store.Query
		want string
	}{
		{"all", store.Query{}, "abccade"},
		{"from", store.Query{SKFrom: "b"}, "bccade"},
		{"to", store.Query{SKTo: "c"}, "abc"},
		{"between", store.Query{SKFrom: "b", SKTo: "d"}, "bccad"},
		{"desc", store.Query{Desc: true}, "edcacba"},
		{"desc between", store.Query{SKFrom: "b", SKTo: "d", Desc: true}, "dcacb"},
		{"desc to prefix", store.Query{SKTo: "c", Desc: true}, "cba"},
		{"desc from prefix", store.Query{SKFrom: "ca", Desc: true}, "edca"},
		{"empty range", store.Query{SKFrom: "x"}, ""},
	}
	for _, tc := range cases {
		q := tc.q
		q.Table, q.PK = Sorted, "q"
		p, err := s.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got string
		for _, it := range p.Items {
			got += it.SK
		}
		if got != tc.want || p.Cursor != "" {
			t.Errorf("%s: got %q cursor %q, want %q", tc.name, got, p.Cursor, tc.want)
		}
	}
}

func testQueryPagination(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 23
	for i := range n {
		mustPut(t, s, Sorted, item("pg", fmt.Sprintf("%03d", i), `{}`, int64(i)))
	}
	for _, desc := range []bool{false, true} {
		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("pagination does not end")
			}
			p, err := s.Query(ctx, store.Query{Table: Sorted, PK: "pg", Limit: 5, Cursor: cursor, Desc: desc})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) > 5 {
				t.Fatalf("page of %d items over limit 5", len(p.Items))
			}
			for _, it := range p.Items {
				seen = append(seen, it.SK)
			}
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
		if len(seen) != n {
			t.Fatalf("desc=%v: saw %d items, want %d: %v", desc, len(seen), n, seen)
		}
		for i := 1; i < n; i++ {
			if (seen[i-1] < seen[i]) == desc {
				t.Fatalf("desc=%v: out of order at %d: %v", desc, i, seen)
			}
		}
	}
}

func testQueryIndex(t *testing.T, s store.Store) {
	ctx := context.Background()
	put := func(pk, ipk, isk string) {
		it := item(pk, "r", `{}`, 1)
		it.IndexPK, it.IndexSK = ipk, isk
		mustPut(t, s, Sorted, it)
	}
	put("x1", "open", "2026-01-02")
	put("x2", "open", "2026-01-01")
	put("x3", "resolved", "2026-01-03")
	put("x4", "", "")
	put("x5", "open", "2026-01-03")
	p, err := s.Query(ctx, store.Query{Table: Sorted, Index: true, PK: "open", SKFrom: "2026-01-02"})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, it := range p.Items {
		got += it.PK
	}
	if got != "x1x5" {
		t.Fatalf("index query got %q, want x1x5", got)
	}
	// Moving an item between index partitions: the old entry disappears.
	put("x1", "resolved", "2026-01-02")
	p, _ = s.Query(ctx, store.Query{Table: Sorted, Index: true, PK: "open"})
	if len(p.Items) != 2 {
		t.Fatalf("after moving x1, open has %d items", len(p.Items))
	}
}

func testConcurrentCreateOneWinner(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, losses := 0, 0
	for i := range n {
		wg.Go(func() {
			err := s.Put(ctx, Simple, item("race", "", fmt.Sprintf(`%d`, i), 1), store.Cond{Kind: store.NotExists})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConditionFailed):
				losses++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || losses != n-1 {
		t.Fatalf("wins %d losses %d, want 1 and %d", wins, losses, n-1)
	}
}

func ptr(it store.Item) *store.Item { return &it }

func testReplace(t *testing.T, s store.Store) {
	ctx := context.Background()
	old, err := s.Replace(ctx, Simple, item("r", "", `"first"`, 1), store.Cond{Kind: store.NotExists})
	if err != nil || old != nil {
		t.Fatalf("first replace: old %+v, %v; want nil, nil", old, err)
	}
	lapsed := store.Item{PK: "r", Doc: []byte(`"locked"`), Version: 2, LockExpiresAt: 100}
	if old, err = s.Replace(ctx, Simple, lapsed, store.Cond{}); err != nil || old == nil || string(old.Doc) != `"first"` {
		t.Fatalf("second replace: old %+v, %v; want the first item", old, err)
	}
	// Taking over the lapsed lock reports what it took over.
	old, err = s.Replace(ctx, Simple, item("r", "", `"taken"`, 3), store.Cond{Kind: store.NotExistsOrLapsed, Now: 200})
	if err != nil || old == nil || !equalItem(*old, lapsed) {
		t.Fatalf("takeover: old %+v, %v; want the lapsed item", old, err)
	}
	// A failed condition reports the old item in the error and changes nothing.
	_, err = s.Replace(ctx, Simple, item("r", "", `"again"`, 4), store.Cond{Kind: store.NotExists})
	var ce *store.ConditionError
	if !errors.As(err, &ce) || ce.Old == nil || ce.Old.Version != 3 {
		t.Fatalf("failed replace: %v", err)
	}
	if got, _ := s.Get(ctx, Simple, "r", ""); string(got.Doc) != `"taken"` {
		t.Fatalf("after failed replace: %s", got.Doc)
	}
}
