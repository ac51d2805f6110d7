package sqsqueue

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// On SQS (moto), a message whose func fails with sqsbatch.RetryAfter is delivered again after
// about that wait, through ChangeMessageVisibility, and not after the queue's visibility
// timeout (a minute here).
func TestRetryAfterComesBackEarlyMoto(t *testing.T) {
	c := motoClient(t)
	url, _ := createQueues(t, c, 5)
	q := &Queue{Client: c, URL: url}
	ctx := context.Background()
	const timeout, wait = time.Minute, 2 * time.Second
	if _, err := q.Send(ctx, []byte(`{"key":"k"}`), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &sqsbatch.Batch{Log: slog.New(slog.DiscardHandler), Visibility: q, VisibilityTimeout: timeout,
		Each: func(context.Context, queue.Message) error {
			return sqsbatch.RetryAfter(errors.New("payments: key in progress"), wait)
		}}
	cons := &queue.Consumer{Queue: q, Handler: b.Handle, Visibility: timeout, Wait: 5 * time.Second,
		SourceARN: "arn:aws:sqs:us-east-1:123456789012:resolve", Log: slog.New(slog.DiscardHandler)}
	res, err := cons.Poll(ctx)
	if err != nil || res.Received != 1 || res.Failed != 1 {
		t.Fatalf("first poll %+v, %v", res, err)
	}
	failed := time.Now()
	// Long-poll until it is back (each receive returns as soon as it is visible).
	for time.Since(failed) < 20*time.Second {
		msgs, err := q.Receive(ctx, 1, timeout, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			continue
		}
		back := time.Since(failed)
		if back < wait/2 || msgs[0].ReceiveCount != 2 {
			t.Fatalf("back after %s with %+v; want about %s", back, msgs[0], wait)
		}
		t.Logf("back after %s (wait %s, queue timeout %s)", back.Round(10*time.Millisecond), wait, timeout)
		return
	}
	t.Fatalf("not back within 20 s of a %s wait: the visibility was not changed", wait)
}
