package localstack

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

// The stack has two clocks. Its own (the domain clock: payments, webhook signatures, locks,
// reconciliation windows) is wall time, or wall time from Config.ClockStart on. Payment
// recovery's runs TimeFactor times faster from the same start. Both are kept in clock.json in
// the data directory, so a restarted stack continues its timelines (due times stay
// meaningful), and a new factor re-anchors recovery's at the time already reached instead of
// jumping.

// clockFile is clock.json: recovery's clock at the top level (the form older data
// directories have), the domain clock beside it.
type clockFile struct {
	clock.Accelerated
	// Domain is absent in a file written before ClockStart existed: wall time.
	Domain *clock.Accelerated `json:"domain,omitempty"`
}

// ErrClockStartConflict is returned when ClockStart names another start than the one the data
// directory's timeline began at: moving a running timeline would reorder what it recorded.
var ErrClockStartConflict = errors.New("localstack: the data directory's clock started elsewhere; use a new data directory (or remove clock.json) to start at another time")

// wallClock is the wall clock as a clock.Accelerated, so both of the stack's clocks have one type.
func wallClock() *clock.Accelerated {
	now := time.Now()
	return &clock.Accelerated{Base: now, Anchor: now, Factor: 1}
}

// newClocks returns the domain clock and recovery's clock (factor times faster), restored
// from, or saved to, dir/clock.json. A zero start means the wall clock's time.
func newClocks(dir string, factor float64, start time.Time) (domain, recovery *clock.Accelerated, err error) {
	path := filepath.Join(dir, "clock.json")
	wall := time.Now()
	base := wall
	if !start.IsZero() {
		base = start
	}
	f := clockFile{Accelerated: clock.Accelerated{Base: base, Anchor: wall, Factor: factor},
		Domain: &clock.Accelerated{Base: base, Anchor: wall, Factor: 1}}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var old clockFile
		if err := json.Unmarshal(b, &old); err != nil || old.Factor <= 0 || (old.Domain != nil && old.Domain.Factor != 1) {
			return nil, nil, errors.New("localstack: clock.json is corrupt; remove it to start a new timeline")
		}
		if old.Domain == nil {
			old.Domain = wallClock() // written before the domain clock was kept: it was wall time
			if !start.IsZero() {
				return nil, nil, fmt.Errorf("%w (it started on the wall clock, not at %s)", ErrClockStartConflict, start.Format(time.RFC3339))
			}
		}
		if !start.IsZero() && !old.Domain.Base.Equal(start) {
			return nil, nil, fmt.Errorf("%w (it started at %s, not at %s)", ErrClockStartConflict,
				old.Domain.Base.Format(time.RFC3339), start.Format(time.RFC3339))
		}
		f = old
		if old.Factor == factor {
			return f.Domain, &f.Accelerated, nil
		}
		f.Accelerated = *old.Rebase(wall, factor)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	}
	b, _ = json.Marshal(f)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, nil, err
	}
	return f.Domain, &f.Accelerated, os.Rename(tmp, path)
}
