package localqueue

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// A message whose func fails with sqsbatch.RetryAfter comes back after that wait, on the
// queue's clock, through the same batch and consumer the local stack runs; a plain failure,
// or a wait past the visibility timeout, comes back after the timeout.
func TestFailedMessageComesBackWhenItSays(t *testing.T) {
	const timeout = 10 * time.Second
	busy := errors.New("key in progress")
	tests := map[string]struct {
		err      error
		comeBack time.Duration
	}{
		"retry after the holder's lock": {err: sqsbatch.RetryAfter(busy, 3*time.Second), comeBack: 3 * time.Second},
		"never straight back":           {err: sqsbatch.RetryAfter(busy, 10*time.Millisecond), comeBack: sqsbatch.MinRetryAfter},
		"plain failure":                 {err: busy, comeBack: timeout},
		"a wait past the timeout":       {err: sqsbatch.RetryAfter(busy, time.Minute), comeBack: timeout},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			q := mustQueue(t, newBroker(t, clk), "resolve", Config{})
			ctx := context.Background()
			if _, err := q.Send(ctx, []byte(`{"key":"k"}`), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			b := &sqsbatch.Batch{Log: slog.New(slog.DiscardHandler), Visibility: q, VisibilityTimeout: timeout,
				Each: func(context.Context, queue.Message) error { return tc.err }}
			c := &queue.Consumer{Queue: q, Handler: b.Handle, Visibility: timeout, SourceARN: "arn:aws:sqs:local:000000000000:resolve",
				Log: slog.New(slog.DiscardHandler)}
			if res, err := c.Poll(ctx); err != nil || res.Received != 1 || res.Failed != 1 {
				t.Fatalf("first poll %+v, %v", res, err)
			}
			receive := func() []queue.Message {
				t.Helper()
				msgs, err := q.Receive(ctx, 1, timeout, 0)
				if err != nil {
					t.Fatal(err)
				}
				return msgs
			}
			clk.Advance(tc.comeBack - time.Millisecond)
			if msgs := receive(); len(msgs) != 0 {
				t.Fatalf("back before %s", tc.comeBack)
			}
			clk.Advance(time.Millisecond)
			msgs := receive()
			if len(msgs) != 1 || msgs[0].ReceiveCount != 2 {
				t.Fatalf("after %s: %+v", tc.comeBack, msgs)
			}
		})
	}
}
