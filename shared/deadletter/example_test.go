package deadletter_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
)

func ExampleExplain() {
	text, action := deadletter.Explain(deadletter.CauseDeclineLimit, deadletter.Facts{
		DeclineCode: "insufficient_funds", StopReason: "window", Window: 14 * 24 * time.Hour})
	fmt.Println(text)
	fmt.Println(action)
	// Output:
	// The card issuer declined: insufficient funds. Next automatic retry was not possible because the 14-day recovery window ended.
	// Tell the customer the payment failed and retry once they confirm funds are available.
}

func ExampleRecords_Retry() {
	dir, _ := os.MkdirTemp("", "dl")
	defer os.RemoveAll(dir)
	s, _ := boltstore.Open(filepath.Join(dir, "twice.db"))
	defer s.Close()
	requeue := deadletter.RequeueFunc(func(_ context.Context, t deadletter.Target, retryID string) error {
		fmt.Println("sent to", t.Queue)
		return nil
	})
	table := &deadletter.Records{Store: s, Requeuer: requeue, Log: slog.New(slog.DiscardHandler)}
	// A retry is an outbox message committed with the record; the relay sends it.
	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{deadletter.KindRetry: table.RetryFollowOn()},
		Log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()

	rec, _, _ := table.Open(ctx, deadletter.Record{Source: deadletter.SourceResolve, Key: "resolve:pay_1",
		Cause: deadletter.CauseHTTPUnknown, Facts: deadletter.Facts{PaymentID: "pay_1"},
		Target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "resolve", Body: []byte(`{"payment_id":"pay_1"}`)}})
	_, first, _ := table.Retry(ctx, rec.ID, "ada", "")
	_, second, _ := table.Retry(ctx, rec.ID, "ada", "") // the double click
	_, _, _ = relay.Drain(ctx)
	got, _ := table.Get(ctx, rec.ID)
	fmt.Println(first, second, got.Status)
	// Output:
	// sent to resolve
	// true false retrying
}
