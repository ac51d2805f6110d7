package attempts

import (
	"context"
	"fmt"
	"testing"

	"github.com/runtwice/twice/shared/clock"
)

// TestBackgroundRecordsBehindTheCaller: Record returns while the store is held up, Flush
// waits for what came before it, Close stores the rest, and a Record after Close is stored in
// line: nothing queued is lost, and a request's cancelled context does not cancel its row.
func TestBackgroundRecordsBehindTheCaller(t *testing.T) {
	var c collector
	gate := make(chan struct{})
	held := batchFunc(func(ctx context.Context, as []Attempt) error {
		<-gate
		if ctx.Err() != nil {
			t.Errorf("%d attempts recorded with a cancelled context", len(as))
		}
		for _, a := range as {
			c.record(ctx, a)
		}
		return nil
	})
	bg := NewBackground(held, nil, 4)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 3 {
		bg.Record(ctx, Attempt{ID: fmt.Sprint("att_", i)}) // returns with the store held up
	}
	cancel() // the request is over
	if n := len(c.attempts()); n != 0 {
		t.Fatalf("%d attempts stored before the store was let go", n)
	}
	flushed := make(chan error)
	go func() { flushed <- bg.Flush(context.Background()) }()
	close(gate)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if n := len(c.attempts()); n != 3 {
		t.Fatalf("after Flush: %d attempts stored, want 3", n)
	}
	for i := 3; i < 10; i++ { // more than the queue holds
		bg.Record(context.Background(), Attempt{ID: fmt.Sprint("att_", i)})
	}
	bg.Close()
	if n := len(c.attempts()); n != 10 {
		t.Fatalf("after Close: %d attempts stored, want 10", n)
	}
	bg.Record(context.Background(), Attempt{ID: "att_late"})
	if n := len(c.attempts()); n != 11 {
		t.Fatalf("a Record after Close: %d attempts stored, want 11", n)
	}
	if err := bg.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after Close: %v", err)
	}
}

type batchFunc func(ctx context.Context, as []Attempt) error

func (f batchFunc) RecordAll(ctx context.Context, as []Attempt) error { return f(ctx, as) }

// TestRecordAllSharesCommitsAndKeepsTheRest: 40 attempts (more than one store call holds) are
// all stored and found by their keys, and one given twice in a round (a caller that sent it
// again) keeps none of the others out of the log and is stored once.
func TestRecordAllSharesCommitsAndKeepsTheRest(t *testing.T) {
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	ctx := context.Background()
	var as []Attempt
	for i := range 40 {
		as = append(as, Attempt{ID: fmt.Sprint("att_", i), Provider: "api", Operation: "payments.create",
			IdempotencyKey: fmt.Sprint("order-", i), Scope: "local", PaymentID: "pay_all"})
	}
	twice := Attempt{ID: "att_twice", Provider: "api", Operation: "payments.create", PaymentID: "pay_x", StartedAt: t0}
	as = append(as[:20], append([]Attempt{twice, twice}, as[20:]...)...)
	if err := l.RecordAll(ctx, as); err != nil {
		t.Fatalf("RecordAll: %v", err)
	}
	for i := range 40 {
		if _, err := l.Get(ctx, fmt.Sprint("att_", i)); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		page, err := l.LookupKey(ctx, "local", fmt.Sprint("order-", i), "")
		if err != nil || len(page.Attempts) != 1 {
			t.Fatalf("lookup of order-%d: %d attempts, %v", i, len(page.Attempts), err)
		}
	}
	page, err := l.Lookup(ctx, ByPaymentID, "pay_x", "")
	if err != nil || len(page.Attempts) != 1 || page.Attempts[0].ID != "att_twice" {
		t.Fatalf("the attempt given twice: %+v, %v; want it once", page.Attempts, err)
	}
}
