package localstack

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// The stack's domain clock is wall time; payment recovery's runs TimeFactor times faster. The
// recovery clock's Base and Anchor are kept in clock.json in the data directory, so a restarted
// stack continues its timeline (and due times stay meaningful), and a new factor re-anchors at
// the time already reached instead of jumping.

// wallClock is the wall clock as a clock.Accelerated, so both of the stack's clocks have one type.
func wallClock() *clock.Accelerated {
	now := time.Now()
	return &clock.Accelerated{Base: now, Anchor: now, Factor: 1}
}

// newClock returns the recovery clock running factor times faster, restored from (or saved
// to) dir/clock.json.
func newClock(dir string, factor float64) (*clock.Accelerated, error) {
	path := filepath.Join(dir, "clock.json")
	wall := time.Now()
	c := &clock.Accelerated{Base: wall, Anchor: wall, Factor: factor}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var old clock.Accelerated
		if err := json.Unmarshal(b, &old); err != nil || old.Factor <= 0 {
			return nil, errors.New("localstack: clock.json is corrupt; remove it to start a new timeline")
		}
		if old.Factor == factor {
			return &old, nil
		}
		c = old.Rebase(wall, factor)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	b, _ = json.Marshal(c)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	return c, os.Rename(tmp, path)
}
