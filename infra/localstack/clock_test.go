package localstack

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNewClockPersistsItsTimeline(t *testing.T) {
	tests := map[string]struct {
		first, second float64
		sameAnchor    bool // the restart keeps the saved clock rather than re-anchoring
	}{
		"restart at the same factor continues": {first: 60, second: 60, sameAnchor: true},
		"a new factor re-anchors":              {first: 60, second: 1},
		"speeding up re-anchors":               {first: 1, second: 3600},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, first, err := newClocks(dir, tc.first, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			_, saved, err := newClocks(dir, tc.first, time.Time{}) // as read back from clock.json: no monotonic reading
			if err != nil {
				t.Fatal(err)
			}
			if !saved.Base.Equal(first.Base) || !saved.Anchor.Equal(first.Anchor) {
				t.Fatalf("clock.json holds %+v, want %+v", saved, first)
			}
			_, second, err := newClocks(dir, tc.second, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if second.Factor != tc.second {
				t.Fatalf("factor %v, want %v", second.Factor, tc.second)
			}
			if got := second.Anchor.Equal(first.Anchor); got != tc.sameAnchor {
				t.Fatalf("anchor kept = %v, want %v", got, tc.sameAnchor)
			}
			// No jump: at the new anchor the restarted clock reads what the old one read.
			if got, want := second.At(second.Anchor), saved.At(second.Anchor); !got.Equal(want) {
				t.Fatalf("restarted clock reads %s at its anchor, the old one %s", got, want)
			}
			_, third, err := newClocks(dir, tc.second, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !third.Base.Equal(second.Base) || !third.Anchor.Equal(second.Anchor) {
				t.Fatalf("clock.json did not keep the re-anchored clock: %+v, want %+v", third, second)
			}
		})
	}
}

func TestNewClockRejectsACorruptFile(t *testing.T) {
	for name, body := range map[string]string{"not json": "{", "zero factor": `{"factor":0}`,
		"accelerated domain clock": `{"factor":1,"domain":{"factor":2}}`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "clock.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := newClocks(dir, 1, time.Time{}); err == nil {
				t.Fatal("newClock accepted a corrupt clock.json")
			}
		})
	}
}

func TestWallClockIsWallTime(t *testing.T) {
	c := wallClock()
	before := time.Now()
	got := c.Now()
	if got.Before(before.Add(-time.Millisecond)) || got.After(time.Now().Add(time.Millisecond)) {
		t.Fatalf("wallClock().Now() = %s, wall %s", got, before)
	}
}

func TestClockStartFixesBothTimelines(t *testing.T) {
	start := time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)
	dir := t.TempDir()
	domain, recovery, err := newClocks(dir, 1000, start)
	if err != nil {
		t.Fatal(err)
	}
	// Both begin at the start; recovery's runs 1000 times faster from the same anchor.
	if !domain.Base.Equal(start) || !recovery.Base.Equal(start) || !domain.Anchor.Equal(recovery.Anchor) {
		t.Fatalf("domain %+v, recovery %+v, want both from %s", domain, recovery, start)
	}
	at := domain.Anchor.Add(time.Second)
	if got, want := domain.At(at), start.Add(time.Second); !got.Equal(want) {
		t.Fatalf("domain clock a second on reads %s, want %s", got, want)
	}
	if got, want := recovery.At(at), start.Add(1000*time.Second); !got.Equal(want) {
		t.Fatalf("recovery clock a second on reads %s, want %s", got, want)
	}

	// A restart with the same start, or none, continues the saved timeline.
	for _, again := range []time.Time{start, {}} {
		d2, r2, err := newClocks(dir, 1000, again)
		if err != nil {
			t.Fatalf("restart with start %v: %v", again, err)
		}
		if !d2.Base.Equal(domain.Base) || !d2.Anchor.Equal(domain.Anchor) || !r2.Anchor.Equal(recovery.Anchor) {
			t.Fatalf("restart moved the timeline: %+v %+v", d2, r2)
		}
	}
	// Another start on the same data directory is refused, as is a start on a directory
	// whose file predates the domain clock (it ran on the wall clock).
	if _, _, err := newClocks(dir, 1000, start.Add(time.Hour)); !errors.Is(err, ErrClockStartConflict) {
		t.Fatalf("another start: %v, want ErrClockStartConflict", err)
	}
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "clock.json"), []byte(`{"base":"2026-11-01T00:00:00Z","anchor":"2026-11-01T00:00:00Z","factor":60}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newClocks(old, 60, start); !errors.Is(err, ErrClockStartConflict) {
		t.Fatalf("start on an old data directory: %v, want ErrClockStartConflict", err)
	}
	d, r, err := newClocks(old, 60, time.Time{})
	if err != nil {
		t.Fatalf("old clock.json without a start: %v", err)
	}
	if r.Factor != 60 || !r.Base.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("old recovery clock not kept: %+v", r)
	}
	if now := d.Now(); now.Sub(time.Now()).Abs() > time.Second {
		t.Fatalf("old data directory's domain clock reads %s, want wall time", now)
	}
}
