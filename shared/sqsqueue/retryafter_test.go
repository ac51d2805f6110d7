package sqsqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
	var mu sync.Mutex
	handled := map[string]int{} // message id -> the receive count of its delivery that failed
	b := &sqsbatch.Batch{Log: slog.New(slog.DiscardHandler), Visibility: q, VisibilityTimeout: timeout,
		Each: func(_ context.Context, m queue.Message) error {
			mu.Lock()
			handled[m.ID] = m.ReceiveCount
			mu.Unlock()
			return sqsbatch.RetryAfter(errors.New("payments: key in progress"), wait)
		}}
	cons := &queue.Consumer{Queue: q, Handler: b.Handle, Visibility: timeout, Wait: 5 * time.Second,
		SourceARN: "arn:aws:sqs:us-east-1:123456789012:resolve", Log: slog.New(slog.DiscardHandler)}
	// On a loaded machine the first long poll has come back empty, and once it held the message
	// twice (one CI run in five each): probably a call that moto served and the client retried
	// (a receive that hid the message for the queue's timeout; a send that queued it twice).
	// Poll until it is handled; what is checked is how soon each message comes back after that.
	var res queue.BatchResult
	for deadline := time.Now().Add(timeout + 15*time.Second); res.Received == 0 && time.Now().Before(deadline); {
		var err error
		if res, err = cons.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if res.Received == 0 || res.Failed != res.Received {
		t.Fatalf("first handled poll %+v", res)
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
		mu.Lock()
		before, seen := handled[msgs[0].ID]
		mu.Unlock()
		if back < wait/2 || !seen || msgs[0].ReceiveCount != before+1 {
			t.Fatalf("back after %s with %+v; want about %s", back, msgs[0], wait)
		}
		t.Logf("back after %s (wait %s, queue timeout %s)", back.Round(10*time.Millisecond), wait, timeout)
		return
	}
	t.Fatalf("not back within 20 s of a %s wait: the visibility was not changed", wait)
}
