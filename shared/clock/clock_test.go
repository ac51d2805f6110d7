package clock

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// fired returns, in index order, the timers whose channel holds a value, and the values.
func fired(timers []Timer) ([]int, []time.Time) {
	var idx []int
	var at []time.Time
	for i, t := range timers {
		select {
		case v := <-t.C():
			idx = append(idx, i)
			at = append(at, v)
		default:
		}
	}
	return idx, at
}

func TestFakeAdvanceFiresDueTimers(t *testing.T) {
	type step struct {
		advance time.Duration
		fired   []int // timer indexes that fire on this step
		waiters int   // pending afterwards
	}
	tests := map[string]struct {
		timers []time.Duration
		stop   []int // stopped before the first step
		steps  []step
	}{
		"one at a time in due order": {
			timers: []time.Duration{3 * time.Minute, time.Minute, 2 * time.Minute},
			steps: []step{
				{advance: 59 * time.Second, waiters: 3},
				{advance: time.Second, fired: []int{1}, waiters: 2},
				{advance: time.Minute, fired: []int{2}, waiters: 1},
				{advance: time.Minute, fired: []int{0}, waiters: 0},
			},
		},
		"one long advance fires all due": {
			timers: []time.Duration{time.Hour, time.Minute, 2 * time.Hour},
			steps:  []step{{advance: time.Hour, fired: []int{0, 1}, waiters: 1}},
		},
		"zero or negative duration fires at once and never waits": {
			timers: []time.Duration{0, -time.Second, time.Second},
			steps: []step{
				{advance: 0, fired: []int{0, 1}, waiters: 1},
				{advance: time.Second, fired: []int{2}, waiters: 0},
			},
		},
		"a stopped timer never fires": {
			timers: []time.Duration{time.Minute, time.Second, time.Hour},
			stop:   []int{1},
			steps: []step{
				{advance: 0, waiters: 2},
				{advance: time.Hour, fired: []int{0, 2}, waiters: 0},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewFake(t0)
			timers := make([]Timer, len(tc.timers))
			for i, d := range tc.timers {
				timers[i] = c.NewTimer(d)
			}
			for _, i := range tc.stop {
				if !timers[i].Stop() {
					t.Fatalf("Stop of pending timer %d returned false", i)
				}
			}
			for n, s := range tc.steps {
				c.Advance(s.advance)
				idx, at := fired(timers)
				if !slices.Equal(idx, s.fired) {
					t.Fatalf("step %d: fired %v, want %v", n, idx, s.fired)
				}
				for _, v := range at {
					if !v.Equal(c.Now()) {
						t.Fatalf("step %d: a timer delivered %s, want the clock's %s", n, v, c.Now())
					}
				}
				if got := c.Waiters(); got != s.waiters {
					t.Fatalf("step %d: %d waiters, want %d", n, got, s.waiters)
				}
			}
		})
	}
}

func TestFakeAdvanceToNext(t *testing.T) {
	tests := map[string]struct {
		timers []time.Duration
		moves  []time.Duration // what each AdvanceToNext reports, until it reports false
	}{
		"no timers":            {},
		"earliest first":       {timers: []time.Duration{2 * time.Minute, time.Minute, 5 * time.Minute}, moves: []time.Duration{time.Minute, time.Minute, 3 * time.Minute}},
		"ties fire together":   {timers: []time.Duration{time.Minute, time.Minute, time.Hour}, moves: []time.Duration{time.Minute, 59 * time.Minute}},
		"immediate not queued": {timers: []time.Duration{0, time.Second}, moves: []time.Duration{time.Second}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewFake(t0)
			for _, d := range tc.timers {
				c.NewTimer(d)
			}
			var moves []time.Duration
			for {
				d, ok := c.AdvanceToNext()
				if !ok {
					break
				}
				moves = append(moves, d)
			}
			if !slices.Equal(moves, tc.moves) {
				t.Fatalf("moves %v, want %v", moves, tc.moves)
			}
			var total time.Duration
			for _, d := range moves {
				total += d
			}
			if got := c.Now().Sub(t0); got != total {
				t.Fatalf("clock moved %s, want %s", got, total)
			}
		})
	}
}

func TestFakeStop(t *testing.T) {
	c := NewFake(t0)
	a, b := c.NewTimer(time.Minute), c.NewTimer(time.Minute)
	if !a.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if a.Stop() {
		t.Fatal("second Stop returned true")
	}
	if got := c.Waiters(); got != 1 {
		t.Fatalf("%d waiters after Stop, want 1", got)
	}
	c.Advance(time.Minute)
	if b.Stop() {
		t.Fatal("Stop of a fired timer returned true")
	}
	select {
	case <-a.C():
		t.Fatal("stopped timer fired")
	default:
	}
}

func TestFakeBlockUntil(t *testing.T) {
	tests := map[string]struct{ timers, n int }{
		"zero returns at once":          {timers: 0, n: 0},
		"waits for the nth timer":       {timers: 3, n: 3},
		"returns when more are pending": {timers: 4, n: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewFake(t0)
			returned := make(chan int)
			go func() {
				c.BlockUntil(tc.n)
				returned <- c.Waiters()
			}()
			for range tc.timers {
				c.NewTimer(time.Minute)
			}
			if got := <-returned; got < tc.n {
				t.Fatalf("BlockUntil(%d) returned with %d waiters", tc.n, got)
			}
		})
	}
	t.Run("not before the nth timer", func(t *testing.T) {
		c := NewFake(t0)
		c.NewTimer(time.Minute)
		returned := make(chan struct{})
		go func() { c.BlockUntil(2); close(returned) }()
		c.BlockUntil(1)
		select {
		case <-returned:
			t.Fatal("BlockUntil(2) returned with one timer pending")
		default:
		}
		c.NewTimer(time.Minute)
		<-returned
	})
}

func TestAcceleratedAt(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	anchor := base.Add(-24 * time.Hour) // a timeline that began a day before the wall anchor
	tests := map[string]struct {
		c    Accelerated
		wall time.Time
		want time.Time
	}{
		"factor 1 is wall time shifted":   {c: Accelerated{Base: base, Anchor: anchor, Factor: 1}, wall: anchor.Add(time.Hour), want: base.Add(time.Hour)},
		"factor 60: a second is a minute": {c: Accelerated{Base: base, Anchor: anchor, Factor: 60}, wall: anchor.Add(10 * time.Second), want: base.Add(10 * time.Minute)},
		"factor 0.5 runs slower":          {c: Accelerated{Base: base, Anchor: anchor, Factor: 0.5}, wall: anchor.Add(time.Hour), want: base.Add(30 * time.Minute)},
		"at the anchor it reads base":     {c: Accelerated{Base: base, Anchor: anchor, Factor: 3600}, wall: anchor, want: base},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.c.At(tc.wall); !got.Equal(tc.want) {
				t.Fatalf("At = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAcceleratedRebase(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		from, to float64
		after    time.Duration // wall time since the rebase
		want     time.Duration // clock time since the rebase
	}{
		"speed up":   {from: 1, to: 60, after: time.Second, want: time.Minute},
		"slow down":  {from: 60, to: 1, after: time.Second, want: time.Second},
		"same speed": {from: 10, to: 10, after: time.Second, want: 10 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := &Accelerated{Base: start, Anchor: start, Factor: tc.from}
			wall := start.Add(time.Hour)
			reached := old.At(wall)
			c := old.Rebase(wall, tc.to)
			if c.Factor != tc.to || !c.Anchor.Equal(wall) {
				t.Fatalf("rebased to factor %v anchor %s, want %v at %s", c.Factor, c.Anchor, tc.to, wall)
			}
			if got := c.At(wall); !got.Equal(reached) {
				t.Fatalf("rebase jumped: %s, want %s", got, reached)
			}
			if got := c.At(wall.Add(tc.after)).Sub(reached); got != tc.want {
				t.Fatalf("%s of wall time after the rebase moved the clock %s, want %s", tc.after, got, tc.want)
			}
		})
	}
}

func TestAcceleratedSurvivesJSON(t *testing.T) {
	start := time.Now() // carries a monotonic reading, which JSON drops (Accelerated is wall-based by design)
	c := &Accelerated{Base: start.Add(-time.Hour), Anchor: start, Factor: 7}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Accelerated
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	wall := start.Add(3 * time.Second)
	if got, want := back.At(wall), c.At(wall); !got.Equal(want) {
		t.Fatalf("restored clock reads %s, the original %s", got, want)
	}
}

func TestAcceleratedTimerWaitsDividedByFactor(t *testing.T) {
	// An hour at 3.6e6× is a millisecond of wall time; unaccelerated, the test would time out.
	c := &Accelerated{Base: t0, Anchor: time.Now(), Factor: 3.6e6}
	timer := c.NewTimer(time.Hour)
	defer timer.Stop()
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	select {
	case <-timer.C():
	case <-guard.C:
		t.Fatal("an accelerated hour did not pass within 10s of wall time")
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	before := time.Now()
	if got := c.Now(); got.Before(before) {
		t.Fatalf("Real().Now() = %s, before %s", got, before)
	}
	timer := c.NewTimer(0)
	<-timer.C()
	if timer.Stop() {
		t.Fatal("Stop of a fired timer returned true")
	}
}
