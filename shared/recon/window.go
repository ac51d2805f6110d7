package recon

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the scheduled window: the last 25 h ending 5 minutes ago, so an hourly run
// overlaps the previous one by a day and gives the provider's events a few minutes to land.
const (
	DefaultWindowHours = 25
	DefaultEndOffset   = 5 * time.Minute
	// MaxWindow bounds one run: Stripe lists events for 30 days, and a longer window is a
	// backfill, not a reconciliation.
	MaxWindow = 31 * 24 * time.Hour
)

// ErrBadWindow: a window is empty, reversed, longer than MaxWindow or in the future.
var ErrBadWindow = errors.New("recon: bad window")

// Window is a span of creation times, both ends inclusive, in whole seconds (the provider's
// created filter has second precision).
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// DefaultWindow is the window of a run at now: hours long, ending offset before now, truncated
// to the whole minute so that runs started a few seconds apart by the scheduler share a run id.
func DefaultWindow(now time.Time, hours int, offset time.Duration) Window {
	to := now.UTC().Add(-offset).Truncate(time.Minute)
	return Window{From: to.Add(-time.Duration(hours) * time.Hour), To: to}
}

// Validate checks w against now.
func (w Window) Validate(now time.Time) error {
	switch {
	case w.From.IsZero() || w.To.IsZero():
		return fmt.Errorf("%w: from and to are required", ErrBadWindow)
	case !w.From.Before(w.To):
		return fmt.Errorf("%w: from must be before to", ErrBadWindow)
	case w.To.Sub(w.From) > MaxWindow:
		return fmt.Errorf("%w: longer than %s", ErrBadWindow, MaxWindow)
	case w.To.After(now):
		return fmt.Errorf("%w: ends in the future", ErrBadWindow)
	}
	return nil
}

// Contains reports whether t falls in w, at second precision.
func (w Window) Contains(t time.Time) bool {
	s := t.Truncate(time.Second)
	return !s.Before(w.From.Truncate(time.Second)) && !s.After(w.To.Truncate(time.Second))
}

// RunID names the run of w: the same window is the same run, so a repeat is idempotent.
func (w Window) RunID() string {
	const f = "20060102T150405Z"
	return "recon_" + w.From.UTC().Format(f) + "_" + w.To.UTC().Format(f)
}

func (w Window) normalized() Window {
	return Window{From: w.From.UTC().Truncate(time.Second), To: w.To.UTC().Truncate(time.Second)}
}
