package retry

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// eventLog is a provider's event log, newest first, whose pages fail as scripted.
type eventLog struct {
	fakeProvider
	ids   []string // newest first
	fails []int    // a walk fails after yielding this many events (one entry per walk)
	walks []provider.EventQuery
}

func (l *eventLog) Events(_ context.Context, q provider.EventQuery) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) {
		walk := len(l.walks)
		l.walks = append(l.walks, q)
		ids := slices.Clone(l.ids)
		if q.After != "" {
			slices.Reverse(ids)
		}
		start := 0
		if cursor := q.After + q.Before; cursor != "" {
			start = slices.Index(ids, cursor) + 1
		}
		for n, id := range ids[start:] {
			if walk < len(l.fails) && n == l.fails[walk] {
				yield(provider.Event{}, &provider.ThrottledError{Op: "events.list", RetryAfter: time.Second})
				return
			}
			if !yield(provider.Event{ID: id}, nil) {
				return
			}
		}
	}
}

// TestEventsResumeAfterAThrottle: a 429 on a page of the event log costs a retry after its
// Retry-After, resuming after the last event yielded in the walk's direction, so every event is
// yielded once; a throttle that outlasts the attempts ends the walk with its error.
func TestEventsResumeAfterAThrottle(t *testing.T) {
	log := []string{"evt_5", "evt_4", "evt_3", "evt_2", "evt_1"}
	tests := map[string]struct {
		q           provider.EventQuery
		fails       []int
		want        []string
		wantCursors []string // the cursor each walk started from
		wantErr     bool
	}{
		"newest first":   {fails: []int{2, 1}, want: log, wantCursors: []string{"", "evt_4", "evt_3"}},
		"oldest first":   {q: provider.EventQuery{After: "evt_1"}, fails: []int{1}, want: []string{"evt_2", "evt_3", "evt_4", "evt_5"}, wantCursors: []string{"evt_1", "evt_2"}},
		"throttle stays": {fails: []int{0, 0, 0}, wantCursors: []string{"", "", ""}, wantErr: true},
		// More throttled pages than a listing has attempts, each after the walk moved on: the
		// count starts again once the walk moves, so it reaches the end of the log.
		"a throttle on every page": {fails: []int{1, 1, 1, 1}, want: log,
			wantCursors: []string{"", "evt_5", "evt_4", "evt_3", "evt_2"}},
		// Stuck at one place after moving on: the run of tries that moved gets a second one,
		// then the walk ends with the error (at most twice the attempts at one place).
		"stuck after moving on": {fails: []int{2, 0, 0, 0, 0, 0}, want: []string{"evt_5", "evt_4"},
			wantCursors: []string{"", "evt_4", "evt_4", "evt_4", "evt_4", "evt_4"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, sleeps := testPolicy(1)
			l := &eventLog{ids: log, fails: tc.fails}
			var got []string
			var err error
			for ev, e := range (&Provider{Next: l, Policy: p}).Events(context.Background(), tc.q) {
				if e != nil {
					err = e
					break
				}
				got = append(got, ev.ID)
			}
			var throttled *provider.ThrottledError
			if tc.wantErr != errors.As(err, &throttled) || !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, err %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
			var cursors []string
			for _, q := range l.walks {
				cursors = append(cursors, q.After+q.Before)
			}
			if !slices.Equal(cursors, tc.wantCursors) {
				t.Fatalf("walks started at %q, want %q", cursors, tc.wantCursors)
			}
			for _, d := range sleeps.waits {
				if d != time.Second {
					t.Fatalf("waited %v, want the Retry-After (1s)", d)
				}
			}
		})
	}
}
