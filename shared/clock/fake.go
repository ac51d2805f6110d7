package clock

import (
	"slices"
	"sync"
	"time"
)

var (
	_ Clock = (*Fake)(nil)
	_ Timer = (*fakeTimer)(nil)
)

// Fake is a clock that moves only when a test moves it. Advancing fires the timers that fall
// due, which wakes the code waiting on them; BlockUntil lets a test wait until that code is
// waiting before it advances.
type Fake struct {
	mu     sync.Mutex
	cond   *sync.Cond // broadcast whenever the set of pending timers changes
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a Fake reading now.
func NewFake(now time.Time) *Fake {
	c := &Fake{now: now}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; d <= 0 fires at once.
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, due: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.cond.Broadcast()
	return t
}

// Advance moves the clock forward by d and fires, earliest first, every timer that falls due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sortTimers()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.due.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):]) // drop the fired timers' pointers from the backing array
	c.timers = kept
	c.cond.Broadcast()
}

// AdvanceToNext moves the clock to the earliest pending timer's due time and fires it (and any
// due at the same time); it returns the distance moved, and false when no timer is pending.
func (c *Fake) AdvanceToNext() (time.Duration, bool) {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return 0, false
	}
	c.sortTimers()
	d := c.timers[0].due.Sub(c.now)
	c.mu.Unlock()
	c.Advance(d)
	return d, true
}

// Waiters returns how many timers are pending.
func (c *Fake) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil returns once at least n timers are pending: a test's way to know that the code
// under test has started waiting before it advances the clock.
func (c *Fake) BlockUntil(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

// sortTimers orders the pending timers by due time, stably so that timers due together fire
// in the order they were made. The caller holds c.mu.
func (c *Fake) sortTimers() {
	slices.SortStableFunc(c.timers, func(a, b *fakeTimer) int { return a.due.Compare(b.due) })
}

type fakeTimer struct {
	clock *Fake
	due   time.Time
	ch    chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	c.cond.Broadcast()
	return true
}
