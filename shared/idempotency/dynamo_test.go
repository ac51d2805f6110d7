package idempotency

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/store"
)

// The DynamoDB store runs every lifecycle test against DynamoDB Local, which the test script
// starts; without it the dynamo subtests skip (and fail under CI).
func init() {
	storeMakers["dynamo"] = func(t testing.TB) store.Store { return newDynamoStore(t, nil) }
}

func newDynamoStore(t testing.TB, calls *dynamo.CallCounter) store.Store {
	var opts []func(*dynamodb.Options)
	if calls != nil {
		opts = append(opts, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, calls.Middleware()) })
	}
	client := testenv.DynamoDB(t, opts...)
	return dynamo.New(client, map[string]string{
		Table:      testenv.CreateTable(t, client, testenv.Schema{}),
		"payments": testenv.CreateTable(t, client, testenv.Schema{}),
		"effects":  testenv.CreateTable(t, client, testenv.Schema{SortKey: true}),
	})
}

// TestDynamoDBCallsPerRequest counts the requests the SDK sends, with a middleware: a new key
// costs one conditional put plus one transaction; a duplicate after completion or while in
// progress costs exactly one call, and no read.
func TestDynamoDBCallsPerRequest(t *testing.T) {
	calls := &dynamo.CallCounter{}
	s := newDynamoStore(t, calls)
	ctx := context.Background()
	k := newKeeper(t, s, newClock())
	f := fp(t, `{"amount":1}`)

	expect := func(step string, want map[string]int) {
		t.Helper()
		if got := calls.Counts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: calls %v, want %v", step, got, want)
		}
		calls.Reset()
	}
	calls.Reset()
	out, err := k.Acquire(ctx, "local", "k", f)
	if err != nil || out.Kind != New {
		t.Fatal(out.Kind, err)
	}
	expect("acquire new key", map[string]int{"PutItem": 1})

	if dup, _ := k.Acquire(ctx, "local", "k", f); dup.Kind != InProgress {
		t.Fatal(dup.Kind)
	}
	expect("duplicate in progress", map[string]int{"PutItem": 1})

	effect := store.Write{Table: "payments", Put: &store.Item{PK: "pay_1", Doc: []byte(`{}`)}, Cond: store.Cond{Kind: store.NotExists}}
	if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}, effect); err != nil {
		t.Fatal(err)
	}
	expect("complete with effect", map[string]int{"TransactWriteItems": 1})

	rep, err := k.Acquire(ctx, "local", "k", f)
	if err != nil || rep.Kind != Replay || string(rep.Response.Body) != `{"id":"pay_1"}` {
		t.Fatal(rep, err)
	}
	expect("duplicate after completion", map[string]int{"PutItem": 1})

	// An unknown outcome keeps the key pending in the same one transaction a release cost; a
	// repeat of it is still one call, and resuming it one more.
	pend, err := k.Acquire(ctx, "local", "pending", f)
	if err != nil || pend.Kind != New {
		t.Fatal(pend.Kind, err)
	}
	calls.Reset()
	pendEffect := store.Write{Table: "payments", Put: &store.Item{PK: "pay_2", Doc: []byte(`{}`)}, Cond: store.Cond{Kind: store.NotExists}}
	if err := k.Pend(ctx, pend.Lease, Response{Status: 202}, []byte(`{"amount":1}`), pendEffect); err != nil {
		t.Fatal(err)
	}
	expect("pend with effect", map[string]int{"TransactWriteItems": 1})
	rp, err := k.Acquire(ctx, "local", "pending", f)
	if err != nil || rp.Kind != Pending {
		t.Fatal(rp.Kind, err)
	}
	expect("repeat of a pending key", map[string]int{"PutItem": 1})
	if _, err := k.Resume(ctx, rp); err != nil {
		t.Fatal(err)
	}
	expect("resume", map[string]int{"PutItem": 1})

	// The single-write mode: a completion or a release with no effect is one conditional write,
	// no transaction.
	solo, err := k.Acquire(ctx, "local", "solo", f)
	if err != nil || solo.Kind != New {
		t.Fatal(solo.Kind, err)
	}
	calls.Reset()
	if err := k.Complete(ctx, solo.Lease, Response{Status: 200, Body: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	expect("complete without effect", map[string]int{"PutItem": 1})
	if err := k.Complete(ctx, solo.Lease, Response{Status: 200}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("second single-write completion: %v", err)
	}
	expect("a lost lease's single write", map[string]int{"PutItem": 1})
	rel, _ := k.Acquire(ctx, "local", "rel", f)
	calls.Reset()
	if err := k.Release(ctx, rel.Lease); err != nil {
		t.Fatal(err)
	}
	expect("release without effect", map[string]int{"DeleteItem": 1})
}

// TestDynamoDBWriteUnits states what each completion mode is billed, as DynamoDB Local reports
// it (ReturnConsumedCapacity): a new key with one effect 1 + 2x2 = 5 write units, with none
// 1 + 1 = 2.
func TestDynamoDBWriteUnits(t *testing.T) {
	units := &dynamo.CapacityCounter{}
	client := testenv.DynamoDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, units.Middleware()) })
	s := dynamo.New(client, map[string]string{
		Table:      testenv.CreateTable(t, client, testenv.Schema{}),
		"payments": testenv.CreateTable(t, client, testenv.Schema{}),
	})
	ctx := context.Background()
	k := newKeeper(t, s, newClock())
	f := fp(t, `{"amount":1}`)
	want := func(step string, w float64) {
		t.Helper()
		if got, _ := units.Units(); got != w {
			t.Fatalf("%s: %v write units, want %v", step, got, w)
		}
		units.Reset()
	}
	out, _ := k.Acquire(ctx, "local", "tx", f)
	effect := store.Write{Table: "payments", Put: &store.Item{PK: "pay_1", Doc: []byte(`{}`)}, Cond: store.Cond{Kind: store.NotExists}}
	if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}, effect); err != nil {
		t.Fatal(err)
	}
	want("new key, complete with one effect", 5)
	out, _ = k.Acquire(ctx, "local", "solo", f)
	if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}); err != nil {
		t.Fatal(err)
	}
	want("new key, single-write completion", 2)
}
