package recon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// stepClock is a fake Clock: After registers a waiter, Set moves time and fires due waiters.
type stepClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	waiting chan time.Time // the deadline of each new waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := waiter{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, w)
	c.waiting <- w.at
	return w.ch
}

func (c *stepClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func TestEveryRunsOnTheScheduleBoundaries(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 11, 29, h, m, 0, 0, time.UTC) }
	clock := &stepClock{now: at(10, 20), waiting: make(chan time.Time, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time)
	finishAt := make(chan time.Time) // the clock when a run ends; zero: no time passes
	done := make(chan error)
	go func() {
		done <- Every(ctx, time.Hour, clock, func(context.Context) {
			ran <- clock.Now()
			if end := <-finishAt; !end.IsZero() {
				clock.Set(end)
			}
		})
	}()

	expect := func(want time.Time) {
		t.Helper()
		if got := <-clock.waiting; !got.Equal(want) {
			t.Fatalf("waiting until %s, want %s", got, want)
		}
	}
	expect(at(11, 0))
	clock.Set(at(10, 59)) // not yet
	clock.Set(at(11, 0))
	if got := <-ran; !got.Equal(at(11, 0)) {
		t.Fatalf("ran at %s", got)
	}
	finishAt <- time.Time{}
	expect(at(12, 0))
	clock.Set(at(12, 0))
	<-ran
	finishAt <- at(13, 30) // the run took 90 minutes: the 13:00 tick is skipped, not run late
	expect(at(14, 0))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Every returned %v", err)
	}
}
