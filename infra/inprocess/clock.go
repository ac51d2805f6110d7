package inprocess

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// The stack's clock (payments, webhook signatures, locks, reconciliation windows) is wall
// time, or wall time from Config.ClockStart on. It is kept in clock.json in the data
// directory, so a restarted stack continues its timeline. Payment recovery's time is each
// execution's own (asl.WithTimeFactor): it starts at the stack's time when the recovery starts
// and runs TimeFactor times faster, and the runner keeps it with the execution.

// clockFile is clock.json.
type clockFile struct {
	Domain *clock.Accelerated `json:"domain,omitempty"`
}

// ErrClockStartConflict is returned when ClockStart names another start than the one the data
// directory's timeline began at: moving a running timeline would reorder what it recorded.
var ErrClockStartConflict = errors.New("inprocess: the data directory's clock started elsewhere; use a new data directory (or remove clock.json) to start at another time")

// wallClock is the wall clock as a clock.Accelerated.
func wallClock() *clock.Accelerated {
	now := time.Now()
	return &clock.Accelerated{Base: now, Anchor: now, Factor: 1}
}

// newClock returns the stack's clock, restored from, or saved to, dir/clock.json. A zero start
// means the wall clock's time.
func newClock(dir string, start time.Time) (*clock.Accelerated, error) {
	path := filepath.Join(dir, "clock.json")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var old clockFile
		if err := json.Unmarshal(b, &old); err != nil || old.Domain == nil || old.Domain.Factor != 1 {
			return nil, errors.New("inprocess: clock.json is corrupt; remove it to start a new timeline")
		}
		if !start.IsZero() && !old.Domain.Base.Equal(start) {
			return nil, fmt.Errorf("%w (it started at %s, not at %s)", ErrClockStartConflict,
				old.Domain.Base.Format(time.RFC3339), start.Format(time.RFC3339))
		}
		return old.Domain, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	c := wallClock()
	if !start.IsZero() {
		c.Base = start
	}
	b, _ = json.Marshal(clockFile{Domain: c})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	return c, os.Rename(tmp, path)
}
