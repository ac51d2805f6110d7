package localstack

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/infra/asl"
)

// clock is the stack's domain clock: wall time, optionally running Factor times faster.
// Now = Base + (wall - Anchor) * Factor; Base and Anchor are kept in clock.json in the data
// directory, so a restarted stack continues its timeline (and due times stay meaningful), and a
// new factor re-anchors at the time already reached instead of jumping.
type clock struct {
	Base   time.Time `json:"base"`
	Anchor time.Time `json:"anchor"`
	Factor float64   `json:"factor"`
}

var _ asl.Clock = (*clock)(nil)

// wallClock is the wall clock in the same type.
func wallClock() *clock {
	now := time.Now()
	return &clock{Base: now, Anchor: now, Factor: 1}
}

func newClock(dir string, factor float64) (*clock, error) {
	path := filepath.Join(dir, "clock.json")
	wall := time.Now()
	c := &clock{Base: wall, Anchor: wall, Factor: factor}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var old clock
		if err := json.Unmarshal(b, &old); err != nil || old.Factor <= 0 {
			return nil, errors.New("localstack: clock.json is corrupt; remove it to start a new timeline")
		}
		if old.Factor == factor {
			return &old, nil
		}
		c.Base = old.Now()
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

func (c *clock) Now() time.Time {
	if c.Factor == 1 {
		return c.Base.Add(time.Since(c.Anchor)).Round(0)
	}
	return c.Base.Add(time.Duration(float64(time.Since(c.Anchor)) * c.Factor))
}

// NewTimer waits d of stack time: d/Factor of wall time.
func (c *clock) NewTimer(d time.Duration) asl.Timer {
	return wallTimer{time.NewTimer(time.Duration(float64(d) / c.Factor))}
}

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
