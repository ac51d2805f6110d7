package clock

import "time"

var _ Clock = (*Accelerated)(nil)

// Accelerated is wall time running Factor times faster from an anchor:
// Now = Base + (wall - Anchor) × Factor. Now is a pure function of wall time, so a process
// that persists the three fields (they carry JSON tags) and restarts continues the same,
// still monotonic, timeline, and due times computed before a kill -9 keep their meaning.
type Accelerated struct {
	Base   time.Time `json:"base"`
	Anchor time.Time `json:"anchor"`
	Factor float64   `json:"factor"`
}

// Now returns the accelerated time.
func (c *Accelerated) Now() time.Time { return c.At(time.Now()) }

// At returns the accelerated time at the wall time wall.
func (c *Accelerated) At(wall time.Time) time.Time {
	if c.Factor == 1 {
		// Round(0) drops the monotonic reading, so a value compares like one read back from disk.
		return c.Base.Add(wall.Sub(c.Anchor)).Round(0)
	}
	return c.Base.Add(time.Duration(float64(wall.Sub(c.Anchor)) * c.Factor))
}

// Rebase returns a clock running factor times faster from wall on, starting at the time c has
// reached then, so changing the factor continues the timeline instead of jumping.
func (c *Accelerated) Rebase(wall time.Time, factor float64) *Accelerated {
	return &Accelerated{Base: c.At(wall), Anchor: wall, Factor: factor}
}

// NewTimer waits d of accelerated time, that is d/Factor of wall time. The value it delivers
// is wall time.
func (c *Accelerated) NewTimer(d time.Duration) Timer {
	return wallTimer{time.NewTimer(time.Duration(float64(d) / c.Factor))}
}
