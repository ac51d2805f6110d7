package asl

import (
	"sort"
	"sync"
	"time"
)

// Clock is the runner's source of time. Waits, retry backoff and task timeouts all go through
// it, so tests drive time with a FakeClock and the local stack can run faster than real time.
type Clock interface {
	Now() time.Time
	// NewTimer fires once d has passed on this clock; d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer. Stop releases it (a FakeClock stops counting it as a
// waiter); the runner stops every timer it no longer needs.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }

var (
	_ Clock = realClock{}
	_ Timer = wallTimer{}
	_ Timer = fakeTimer{}
	_ Clock = (*AcceleratedClock)(nil)
	_ Clock = (*FakeClock)(nil)
)

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

// RealClock returns the wall clock.
func RealClock() Clock { return realClock{} }

// AcceleratedClock runs Factor times faster than the wall clock from Epoch on:
// Now = Epoch + (wall now - Epoch) * Factor. Because Now is a pure function of wall time,
// a restarted process given the same Epoch sees the same, still monotonic, time, so
// persisted due times keep their meaning across kill -9.
type AcceleratedClock struct {
	Epoch  time.Time
	Factor float64
	wall   func() time.Time
}

// NewAcceleratedClock returns a clock running factor times faster than wall time since epoch.
// Keep epoch stable across restarts (store it beside the data file).
func NewAcceleratedClock(epoch time.Time, factor float64) *AcceleratedClock {
	if factor <= 0 {
		factor = 1
	}
	return &AcceleratedClock{Epoch: epoch, Factor: factor, wall: time.Now}
}

// Now returns the accelerated time.
func (c *AcceleratedClock) Now() time.Time {
	elapsed := c.wall().Sub(c.Epoch)
	return c.Epoch.Add(time.Duration(float64(elapsed) * c.Factor))
}

// NewTimer waits d of accelerated time, that is d/Factor of wall time. The value it
// delivers is wall time.
func (c *AcceleratedClock) NewTimer(d time.Duration) Timer {
	return wallTimer{time.NewTimer(time.Duration(float64(d) / c.Factor))}
}

// FakeClock is a manually advanced clock for tests.
type FakeClock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	due time.Time
	ch  chan time.Time
}

type fakeTimer struct {
	c *FakeClock
	w *fakeWaiter
}

func (t fakeTimer) C() <-chan time.Time { return t.w.ch }

func (t fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, w := range t.c.waiters {
		if w == t.w {
			t.c.waiters = append(t.c.waiters[:i], t.c.waiters[i+1:]...)
			t.c.cond.Broadcast()
			return true
		}
	}
	return false
}

// NewFakeClock returns a FakeClock set to now.
func NewFakeClock(now time.Time) *FakeClock {
	c := &FakeClock{now: now}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer registers a waiter that fires when the clock is advanced to now+d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{due: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- c.now
		return fakeTimer{c, w}
	}
	c.waiters = append(c.waiters, w)
	c.cond.Broadcast()
	return fakeTimer{c, w}
}

// Advance moves the clock forward by d and fires every waiter that is due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.due.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
	c.cond.Broadcast()
}

// AdvanceToNext moves the clock to the earliest pending waiter's due time and fires it;
// it returns the distance moved and false when nothing waits.
func (c *FakeClock) AdvanceToNext() (time.Duration, bool) {
	c.mu.Lock()
	if len(c.waiters) == 0 {
		c.mu.Unlock()
		return 0, false
	}
	sort.Slice(c.waiters, func(i, j int) bool { return c.waiters[i].due.Before(c.waiters[j].due) })
	d := c.waiters[0].due.Sub(c.now)
	c.mu.Unlock()
	c.Advance(d)
	return d, true
}

// Waiters returns how many timers are pending.
func (c *FakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntil blocks until at least n timers are pending, so a test can advance time
// only once the code under test is waiting.
func (c *FakeClock) BlockUntil(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.waiters) < n {
		c.cond.Wait()
	}
}
