package localstack

import (
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
			first, err := newClock(dir, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			saved, err := newClock(dir, tc.first) // as read back from clock.json: no monotonic reading
			if err != nil {
				t.Fatal(err)
			}
			if !saved.Base.Equal(first.Base) || !saved.Anchor.Equal(first.Anchor) {
				t.Fatalf("clock.json holds %+v, want %+v", saved, first)
			}
			second, err := newClock(dir, tc.second)
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
			third, err := newClock(dir, tc.second)
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
	for name, body := range map[string]string{"not json": "{", "zero factor": `{"factor":0}`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "clock.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := newClock(dir, 1); err == nil {
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
