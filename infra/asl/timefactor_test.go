package asl

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// TestTimeFactorGivesEachExecutionItsOwnClock starts two executions ten days apart on the
// runner's (fake) clock under a time factor: each one's timeline begins at its own start, its
// hour-long Wait passes in about a second of wall time, and the task sees the time the
// execution has reached through $$.State.EnteredTime.
func TestTimeFactorGivesEachExecutionItsOwnClock(t *testing.T) {
	const def = `{"StartAt":"Wait","States":{
		"Wait":{"Type":"Wait","Seconds":3600,"Next":"Charge"},
		"Charge":{"Type":"Task","Resource":"charge","Parameters":{"now.$":"$$.State.EnteredTime"},"End":true}}}`
	seen := make(chan time.Time, 2)
	tasks := TaskRegistry{"charge": func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Now time.Time `json:"now"`
		}
		if err := json.Unmarshal(in, &p); err != nil {
			return nil, err
		}
		seen <- p.Now
		return in, nil
	}}
	h := newHarness(t, tasks, WithTimeFactor(3600))
	h.define("sm", def)
	tests := []struct {
		name  string
		start time.Time
	}{{"first", t0}, {"ten-days-later", t0.Add(10 * 24 * time.Hour)}}
	for _, tc := range tests {
		h.clock.Advance(tc.start.Sub(h.clock.Now()))
		ex := h.start("sm", tc.name, `{}`)
		if !ex.StartDate.Equal(tc.start) {
			t.Fatalf("%s: started at %s, want %s", tc.name, ex.StartDate, tc.start)
		}
		if done := h.await(ex.ExecutionArn); done.Status != StatusSucceeded {
			t.Fatalf("%s: %+v", tc.name, done)
		}
		// The Wait ends an hour into the execution's own time: the task runs at or after it,
		// and well before a second hour (about a second of wall time each).
		got := <-seen
		if lo, hi := tc.start.Add(time.Hour), tc.start.Add(2*time.Hour); got.Before(lo.Truncate(time.Millisecond)) || got.After(hi) {
			t.Fatalf("%s: the task saw %s, want within [%s, %s]", tc.name, got, lo, hi)
		}
	}
}

// TestResumeAdoptsTheRunnersFactor resumes an execution with its own clock under another
// factor: the clock goes on from the time it had reached, at the new rate.
func TestResumeAdoptsTheRunnersFactor(t *testing.T) {
	wall := time.Now()
	tests := map[string]struct {
		saved  *clock.Accelerated
		factor float64
		want   float64 // the factor after resume; 0: no clock of its own
	}{
		"same factor keeps the clock": {saved: &clock.Accelerated{Base: t0, Anchor: wall.Add(-time.Minute), Factor: 100}, factor: 100, want: 100},
		"a new factor rebases":        {saved: &clock.Accelerated{Base: t0, Anchor: wall.Add(-time.Minute), Factor: 100}, factor: 10, want: 10},
		"no factor runs at wall rate": {saved: &clock.Accelerated{Base: t0, Anchor: wall.Add(-time.Minute), Factor: 100}, factor: 0, want: 1},
		"no clock of its own stays":   {factor: 100},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := New(nil, TaskRegistry{}, WithTimeFactor(tc.factor))
			defer r.Close()
			rec := &Record{Clock: tc.saved}
			var before time.Time
			if tc.saved != nil {
				before = tc.saved.Now()
			}
			r.adoptFactor(rec)
			if tc.want == 0 {
				if rec.Clock != nil {
					t.Fatalf("clock %+v, want none", rec.Clock)
				}
				return
			}
			if rec.Clock.Factor != tc.want {
				t.Fatalf("factor %v, want %v", rec.Clock.Factor, tc.want)
			}
			// No jump back: it reads at least what the saved clock read just before.
			if now := rec.Clock.Now(); now.Before(before) {
				t.Fatalf("resumed clock reads %s, before the saved clock's %s", now, before)
			}
		})
	}
}

// TestTimeFactorSurvivesRestart: an execution's own clock is checkpointed with it.
func TestTimeFactorSurvivesRestart(t *testing.T) {
	const def = `{"StartAt":"Wait","States":{"Wait":{"Type":"Wait","Seconds":864000,"Next":"Done"},"Done":{"Type":"Succeed"}}}`
	file := filepath.Join(t.TempDir(), "asl.db")
	db := openDB(t, file)
	h := newHarnessOn(t, db, clock.NewFake(t0), TaskRegistry{}, WithTimeFactor(1000))
	h.define("sm", def)
	arn := h.start("sm", "x", `{}`).ExecutionArn
	h.runner.Close()
	rec, err := h.store.Load(context.Background(), arn)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Clock == nil || rec.Clock.Factor != 1000 || !rec.Clock.Base.Equal(t0) {
		t.Fatalf("checkpointed clock %+v, want factor 1000 from %s", rec.Clock, t0)
	}
	// Entered moments after the start (the clock runs on at 1000 times the wall's rate).
	if due, want := rec.Cursor.DueTime, t0.Add(864000*time.Second); due.Before(want) || due.After(want.Add(time.Minute)) {
		t.Fatalf("due %s, want ten days after the start on its own clock (%s)", due, want)
	}
	db.Close()
}

// TestRetryBackoffIsOnTheRunnersClock: under a time factor a Task's retry waits its backoff on
// the runner's clock (the service behind the task recovers in that time, not in the
// execution's faster one), and the execution's own clock goes on from the due time.
func TestRetryBackoffIsOnTheRunnersClock(t *testing.T) {
	const def = `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"flaky","Parameters":{"now.$":"$$.State.EnteredTime"},
		"Retry":[{"ErrorEquals":["States.ALL"],"IntervalSeconds":30,"MaxAttempts":1,"BackoffRate":1}],"End":true}}}`
	calls := 0
	tasks := TaskRegistry{"flaky": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		calls++
		if calls == 1 {
			return nil, errorsJoinWrap(context.DeadlineExceeded)
		}
		return json.RawMessage(`{}`), nil
	}}
	h := newHarness(t, tasks, WithTimeFactor(1000))
	h.define("sm", def)
	ex := h.start("sm", "x", `{}`)
	// The retry waits on the runner's (fake) clock: nothing runs until it has moved 30 s.
	h.clock.BlockUntil(1)
	if calls != 1 {
		t.Fatalf("%d calls before the backoff passed", calls)
	}
	h.clock.Advance(30 * time.Second)
	if done := h.await(ex.ExecutionArn); done.Status != StatusSucceeded || calls != 2 {
		t.Fatalf("%+v after %d calls", done, calls)
	}
	// The execution's clock moved by the backoff, not by 30 s times the factor (8 h 20 min).
	var scheduled []time.Time
	for _, e := range h.history(ex.ExecutionArn) {
		if e.Type == "TaskScheduled" {
			scheduled = append(scheduled, e.Timestamp)
		}
	}
	if len(scheduled) != 2 {
		t.Fatalf("scheduled %v", scheduled)
	}
	if gap := scheduled[1].Sub(scheduled[0]); gap < 30*time.Second || gap > 30*time.Second+time.Hour {
		t.Fatalf("the retry came %s later on the execution's clock, want about 30 s", gap)
	}
}

// TestStartExecutionAtContinuesATimeline starts an execution whose own clock begins at a time
// ahead of the runner's (a workflow resumed at the moment it waited for): its first state is
// entered at that time, not at the runner's.
func TestStartExecutionAtContinuesATimeline(t *testing.T) {
	const def = `{"StartAt":"Charge","States":{
		"Charge":{"Type":"Task","Resource":"charge","Parameters":{"now.$":"$$.State.EnteredTime"},"End":true}}}`
	seen := make(chan time.Time, 1)
	tasks := TaskRegistry{"charge": func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Now time.Time `json:"now"`
		}
		if err := json.Unmarshal(in, &p); err != nil {
			return nil, err
		}
		seen <- p.Now
		return in, nil
	}}
	h := newHarness(t, tasks, WithTimeFactor(3600))
	h.define("sm", def)
	at := t0.Add(9 * 24 * time.Hour)
	ex, err := h.runner.StartExecutionAt(context.Background(), "sm", "resumed", []byte(`{}`), at)
	if err != nil {
		t.Fatal(err)
	}
	if done := h.await(ex.ExecutionArn); done.Status != StatusSucceeded {
		t.Fatalf("%+v", done)
	}
	if got := <-seen; got.Before(at.Truncate(time.Millisecond)) || got.After(at.Add(time.Hour)) {
		t.Fatalf("the task saw %s, want from %s on (the runner's clock is at %s)", got, at, h.clock.Now())
	}
}
