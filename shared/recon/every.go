package recon

import (
	"context"
	"time"
)

// Clock is the time source of Every: the local scheduler runs on it, tests on a fake.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Every is the local stand-in for EventBridge Scheduler's rate(interval): it calls run at every
// multiple of interval on clock (rate(1 hour): at the top of each hour), one run at a time,
// until ctx ends, and returns ctx.Err(). A run that overruns the next tick delays it rather
// than overlapping; the tick it missed is skipped, as the overlapping window covers it.
func Every(ctx context.Context, interval time.Duration, clock Clock, run func(context.Context)) error {
	if interval <= 0 {
		interval = time.Hour
	}
	for {
		now := clock.Now()
		next := now.Truncate(interval).Add(interval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(next.Sub(now)):
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run(ctx)
	}
}
