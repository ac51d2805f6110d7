package recon

import (
	"context"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// Every is the local stand-in for EventBridge Scheduler's rate(interval): it calls run at every
// multiple of interval on c (rate(1 hour): at the top of each hour), one run at a time,
// until ctx ends, and returns ctx.Err(). A run that overruns the next tick delays it rather
// than overlapping; the tick it missed is skipped, as the overlapping window covers it.
func Every(ctx context.Context, interval time.Duration, c clock.Clock, run func(context.Context)) error {
	if interval <= 0 {
		interval = time.Hour
	}
	for {
		now := c.Now()
		next := now.Truncate(interval).Add(interval)
		t := c.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run(ctx)
	}
}
