package dynamo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// testEndpoint returns the DynamoDB-API server the test script started. Without one the test
// is skipped locally and fails in CI, so a missing server never passes silently there.
func testEndpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv("TWICE_TEST_DYNAMODB_ENDPOINT")
	if ep == "" {
		if os.Getenv("CI") == "true" || os.Getenv("TWICE_TEST_REQUIRE_SERVERS") == "1" {
			t.Fatal("TWICE_TEST_DYNAMODB_ENDPOINT is not set and servers are required")
		}
		t.Skip("TWICE_TEST_DYNAMODB_ENDPOINT not set; run through the test script")
	}
	return ep
}

var tableSeq atomic.Int64

// newTables creates a fresh table for each logical name (a sorted table with the index for
// storetest.Sorted, a pk-only table otherwise) and deletes them when the test ends.
func newTables(t testing.TB, client *dynamodb.Client, logical ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	tables := make(map[string]string, len(logical))
	for _, l := range logical {
		name := fmt.Sprintf("twice-test-%d-%d-%s", os.Getpid(), tableSeq.Add(1), l)
		sorted := l == storetest.Sorted
		if err := CreateTable(ctx, client, name, sorted, sorted); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := DeleteTable(context.Background(), client, name); err != nil {
				t.Errorf("delete %s: %v", name, err)
			}
		})
		tables[l] = name
	}
	return tables
}

func TestContract(t *testing.T) {
	client := NewClient(testEndpoint(t))
	storetest.Run(t, func(t *testing.T) store.Store {
		return New(client, newTables(t, client, storetest.Simple, storetest.Sorted))
	})
}

// TestCallCounts proves what each path costs in requests: a duplicate is one PutItem that
// carries the old item back, with no read.
func TestCallCounts(t *testing.T) {
	var calls CallCounter
	client := NewClient(testEndpoint(t), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.Middleware())
	})
	s := New(client, newTables(t, client, storetest.Simple, storetest.Sorted))
	ctx := context.Background()
	old := store.Item{PK: "k", Doc: []byte(`{"status":"done"}`), Version: 3}
	if err := s.Put(ctx, storetest.Simple, old, store.Cond{Kind: store.NotExists}); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		run  func() error
		want map[string]int
		// check inspects the error the path returned.
		check func(t *testing.T, err error)
	}{
		{
			name: "put new key",
			run: func() error {
				return s.Put(ctx, storetest.Simple, store.Item{PK: "new", Version: 1}, store.Cond{Kind: store.NotExists})
			},
			want:  map[string]int{"PutItem": 1},
			check: wantNil,
		},
		{
			name: "put duplicate returns old",
			run: func() error {
				return s.Put(ctx, storetest.Simple, store.Item{PK: "k", Version: 4}, store.Cond{Kind: store.NotExists})
			},
			want: map[string]int{"PutItem": 1},
			check: func(t *testing.T, err error) {
				var ce *store.ConditionError
				if !errors.As(err, &ce) || ce.Old == nil || string(ce.Old.Doc) != string(old.Doc) || ce.Old.Version != 3 {
					t.Fatalf("got %v (%+v), want condition error with the old item", err, ce)
				}
			},
		},
		{
			name: "transaction of two",
			run: func() error {
				return s.Transact(ctx,
					store.Write{Table: storetest.Simple, Put: &store.Item{PK: "t1", Version: 1}, Cond: store.Cond{Kind: store.NotExists}},
					store.Write{Table: storetest.Sorted, Put: &store.Item{PK: "t2", SK: "a", Version: 1}, Cond: store.Cond{Kind: store.NotExists}},
				)
			},
			want:  map[string]int{"TransactWriteItems": 1},
			check: wantNil,
		},
		{
			name: "failed transaction returns old",
			run: func() error {
				return s.Transact(ctx,
					store.Write{Table: storetest.Sorted, Put: &store.Item{PK: "t3", SK: "a", Version: 1}, Cond: store.Cond{Kind: store.NotExists}},
					store.Write{Table: storetest.Simple, Put: &store.Item{PK: "k", Version: 9}, Cond: store.Cond{Kind: store.VersionIs, Version: 8}},
				)
			},
			want: map[string]int{"TransactWriteItems": 1},
			check: func(t *testing.T, err error) {
				var ce *store.ConditionError
				if !errors.As(err, &ce) || ce.Index != 1 || ce.Old == nil || ce.Old.Version != 3 {
					t.Fatalf("got %v (%+v), want condition error on write 1 with version 3", err, ce)
				}
			},
		},
		{
			name: "invalid transaction makes no call",
			run: func() error {
				return s.Transact(ctx,
					store.Write{Table: storetest.Simple, Put: &store.Item{PK: "d"}},
					store.Write{Table: storetest.Simple, Delete: &store.Key{PK: "d"}},
				)
			},
			want: map[string]int{},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("got %v, want ErrInvalid", err)
				}
			},
		},
		{
			name: "delete with failed condition returns old",
			run: func() error {
				return s.Delete(ctx, storetest.Simple, "k", "", store.Cond{Kind: store.VersionIs, Version: 1})
			},
			want: map[string]int{"DeleteItem": 1},
			check: func(t *testing.T, err error) {
				var ce *store.ConditionError
				if !errors.As(err, &ce) || ce.Old == nil || ce.Old.Version != 3 {
					t.Fatalf("got %v, want condition error with old version 3", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls.Reset()
			tc.check(t, tc.run())
			got := calls.Counts()
			if len(got) != len(tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
			for op, n := range tc.want {
				if got[op] != n {
					t.Fatalf("calls %v, want %v", got, tc.want)
				}
			}
			if got["GetItem"] != 0 {
				t.Fatalf("made %d GetItem calls", got["GetItem"])
			}
		})
	}
}

func wantNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestErrors checks the mapping of requests DynamoDB refuses, and that messages stay clean.
func TestErrors(t *testing.T) {
	client := NewClient(testEndpoint(t))
	s := New(client, newTables(t, client, storetest.Simple, storetest.Sorted))
	ctx := context.Background()
	cases := map[string]struct {
		run  func() error
		want error
	}{
		"unknown table": {func() error { _, err := s.Get(ctx, "nope", "a", ""); return err }, store.ErrInvalid},
		// A put with a SK into a pk-only table stores sk as a plain attribute (DynamoDB cannot
		// tell), but reading by that key is refused.
		"sort key in pk-only table": {func() error {
			_, err := s.Get(ctx, storetest.Simple, "a", "b")
			return err
		}, store.ErrInvalid},
		"missing sort key": {func() error {
			return s.Put(ctx, storetest.Sorted, store.Item{PK: "a"}, store.Cond{})
		}, store.ErrInvalid},
		"index pk without index sk": {func() error {
			return s.Put(ctx, storetest.Sorted, store.Item{PK: "a", SK: "b", IndexPK: "x"}, store.Cond{})
		}, store.ErrInvalid},
		"empty pk get":       {func() error { _, err := s.Get(ctx, storetest.Simple, "", ""); return err }, store.ErrInvalid},
		"bad condition kind": {func() error { return s.Put(ctx, storetest.Simple, store.Item{PK: "a"}, store.Cond{Kind: 99}) }, store.ErrInvalid},
		"too many writes": {func() error {
			ws := make([]store.Write, maxTransact+1)
			for i := range ws {
				ws[i] = store.Write{Table: storetest.Simple, Put: &store.Item{PK: fmt.Sprint(i)}}
			}
			return s.Transact(ctx, ws...)
		}, store.ErrInvalid},
		"item over 400 KB": {func() error {
			return s.Put(ctx, storetest.Simple, store.Item{PK: "big", Doc: make([]byte, 410_000)}, store.Cond{Kind: store.NotExists})
		}, store.ErrInvalid},
		"transaction with an item over 400 KB": {func() error {
			return s.Transact(ctx,
				store.Write{Table: storetest.Simple, Put: &store.Item{PK: "ok"}, Cond: store.Cond{Kind: store.NotExists}},
				store.Write{Table: storetest.Simple, Put: &store.Item{PK: "big", Doc: make([]byte, 410_000)}})
		}, store.ErrInvalid},
		"transaction missing a sort key": {func() error {
			return s.Transact(ctx, store.Write{Table: storetest.Sorted, Put: &store.Item{PK: "a"}})
		}, store.ErrInvalid},
		"foreign cursor": {func() error {
			_, err := s.Query(ctx, store.Query{Table: storetest.Sorted, PK: "a", Cursor: encodeCursor(key("b", "c"), false)})
			return err
		}, store.ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.run()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
			for _, leak := range []string{"RequestID", "127.0.0.1", "https response error"} {
				if msg := err.Error(); strings.Contains(msg, leak) {
					t.Fatalf("message leaks %q: %s", leak, msg)
				}
			}
		})
	}
}

// TestConcurrentTransactions runs transactions on the same items at once: each must commit or
// fail with store.ErrConflict (DynamoDB's TransactionConflict), never an unmapped error.
func TestConcurrentTransactions(t *testing.T) {
	client := NewClient(testEndpoint(t))
	s := New(client, newTables(t, client, storetest.Simple, storetest.Sorted))
	ctx := context.Background()
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- s.Transact(ctx,
				store.Write{Table: storetest.Simple, Put: &store.Item{PK: "hot", Version: int64(i)}},
				store.Write{Table: storetest.Sorted, Put: &store.Item{PK: "hot", SK: "x", Version: int64(i)}},
			)
		}()
	}
	committed, conflicts := 0, 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			committed++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Errorf("unmapped error: %v", err)
		}
	}
	if committed == 0 {
		t.Fatal("no transaction committed")
	}
	t.Logf("%d committed, %d conflicts", committed, conflicts)
}
