package recon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

func TestEveryRunsOnTheScheduleBoundaries(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 11, 29, h, m, 0, 0, time.UTC) }
	c := clock.NewFake(at(10, 20))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan time.Time)
	took := make(chan time.Duration) // how long each run takes on the clock
	done := make(chan error)
	go func() {
		done <- Every(ctx, time.Hour, c, func(context.Context) {
			ran <- c.Now()
			c.Advance(<-took)
		})
	}()

	// next waits for Every's next tick, moves the clock to it and checks the run started there.
	next := func(want time.Time) {
		t.Helper()
		c.BlockUntil(1)
		c.AdvanceToNext()
		if got := <-ran; !got.Equal(want) {
			t.Fatalf("ran at %s, want %s", got, want)
		}
	}

	c.BlockUntil(1)
	c.Advance(39 * time.Minute) // 10:59: not yet
	if c.Waiters() != 1 {
		t.Fatal("the tick fired before the top of the hour")
	}
	c.Advance(time.Minute)
	if got := <-ran; !got.Equal(at(11, 0)) {
		t.Fatalf("ran at %s", got)
	}
	took <- 0
	next(at(12, 0))
	took <- 90 * time.Minute // the run overran: the 13:00 tick is skipped, not run late
	next(at(14, 0))
	took <- 0

	c.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Every returned %v", err)
	}
	if n := c.Waiters(); n != 0 {
		t.Fatalf("Every left %d timers pending after its context ended", n)
	}
}
