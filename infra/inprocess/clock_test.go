package inprocess

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestClockStartIsKeptWithTheData(t *testing.T) {
	start := time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)
	dir := t.TempDir()
	c, err := newClock(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Base.Equal(start) || c.Factor != 1 {
		t.Fatalf("clock %+v, want wall-speed time from %s", c, start)
	}
	if got, want := c.At(c.Anchor.Add(90*time.Second)), start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("90 s on the clock reads %s, want %s", got, want)
	}
	// A restart with the same start, or none, continues the saved timeline.
	for _, again := range []time.Time{start, {}} {
		c2, err := newClock(dir, again)
		if err != nil {
			t.Fatalf("restart with start %v: %v", again, err)
		}
		if !c2.Base.Equal(c.Base) || !c2.Anchor.Equal(c.Anchor) {
			t.Fatalf("restart moved the timeline: %+v, want %+v", c2, c)
		}
	}
	// Another start on the same data directory is refused.
	if _, err := newClock(dir, start.Add(time.Hour)); !errors.Is(err, ErrClockStartConflict) {
		t.Fatalf("another start: %v, want ErrClockStartConflict", err)
	}
}

func TestClockWithoutStartIsWallTime(t *testing.T) {
	c, err := newClock(t.TempDir(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// The one comparison with the wall clock here: it is what this clock must be.
	if d := c.Now().Sub(time.Now()); d.Abs() > time.Second {
		t.Fatalf("clock is %s off the wall clock", d)
	}
}

func TestNewClockRejectsACorruptFile(t *testing.T) {
	for name, body := range map[string]string{"not json": "{", "accelerated": `{"domain":{"factor":2}}`, "no clock": `{"base":"2026-11-01T00:00:00Z","factor":60}`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "clock.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := newClock(dir, time.Time{}); err == nil {
				t.Fatal("newClock accepted a corrupt clock.json")
			}
		})
	}
}
