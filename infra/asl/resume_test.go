package asl

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// TestCrashResume stops a runner mid-Wait and mid-Task, reopens the bbolt file in a new
// runner each time, and checks the execution continues where it stopped: the Wait keeps its
// due time, the interrupted Task runs again, the completed one never does.
func TestCrashResume(t *testing.T) {
	const def = `{"StartAt":"Charge","States":{
		"Charge":{"Type":"Task","Resource":"charge","ResultPath":"$.charge","Next":"Wait"},
		"Wait":{"Type":"Wait","Seconds":3600,"Next":"Record"},
		"Record":{"Type":"Task","Resource":"record","ResultPath":"$.record","Next":"Done"},
		"Done":{"Type":"Succeed"}}}`
	file := filepath.Join(t.TempDir(), "asl.db")
	var charges, records atomic.Int32
	recordStarted := make(chan struct{}, 4)
	var recordBlocks atomic.Bool
	recordBlocks.Store(true)
	tasks := TaskRegistry{
		"charge": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"attempt": charges.Add(1)})
		},
		"record": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			records.Add(1)
			recordStarted <- struct{}{}
			if recordBlocks.Load() {
				<-ctx.Done() // killed mid-call
				return nil, ctx.Err()
			}
			return json.RawMessage(`"recorded"`), nil
		},
	}

	// Run 1: the charge completes, then the process stops during the Wait.
	db := openDB(t, file)
	h := newHarnessOn(t, db, clock.NewFake(t0), tasks)
	h.define("recovery", def)
	arn := h.start("recovery", "inv_1-1", `{"invoice":"inv_1"}`).ExecutionArn
	h.clock.BlockUntil(1)
	h.runner.Close()
	db.Close()

	// Run 2: ten minutes later. The Wait resumes with its original due time.
	db = openDB(t, file)
	h = newHarnessOn(t, db, clock.NewFake(t0.Add(10*time.Minute)), tasks)
	h.define("recovery", def)
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	h.clock.BlockUntil(1)
	if d, _ := h.clock.AdvanceToNext(); d != 50*time.Minute {
		t.Fatalf("Wait resumed with %s left, want 50m", d)
	}
	<-recordStarted
	h.runner.Close() // mid-Task
	db.Close()

	// Run 3: the interrupted Record task runs again and completes.
	recordBlocks.Store(false)
	db = openDB(t, file)
	defer db.Close()
	h = newHarnessOn(t, db, clock.NewFake(t0.Add(2*time.Hour)), tasks)
	// No Define: the execution runs the definition version it started with, from the store.
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	ex := h.await(arn)
	if ex.Status != StatusSucceeded {
		t.Fatalf("status %s %s", ex.Status, ex.Cause)
	}
	jsonEqual(t, ex.Output, `{"invoice":"inv_1","charge":{"attempt":1},"record":"recorded"}`)
	if charges.Load() != 1 {
		t.Errorf("charge ran %d times, want 1", charges.Load())
	}
	if records.Load() != 2 {
		t.Errorf("record ran %d times, want 2 (interrupted once, at-least-once)", records.Load())
	}
	evs := h.history(arn)
	want := []string{"ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSucceeded", "TaskStateExited",
		"WaitStateEntered", "WaitStateExited", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSucceeded", "TaskStateExited",
		"SucceedStateEntered", "SucceedStateExited", "ExecutionSucceeded"}
	if got := eventTypes(evs); !slices.Equal(got, want) {
		t.Fatalf("history\n got %v\nwant %v", got, want)
	}
	for i, e := range evs {
		if e.ID != int64(i+1) || e.PreviousEventID != int64(i) {
			t.Fatalf("event %d has id %d previous %d", i, e.ID, e.PreviousEventID)
		}
	}
	if exited := evs[7]; !exited.Timestamp.Equal(t0.Add(time.Hour)) {
		t.Errorf("Wait exited at %s, want %s", exited.Timestamp, t0.Add(time.Hour))
	}
	if ex.StateTransitions != 4 {
		t.Errorf("transitions %d, want 4", ex.StateTransitions)
	}
}

// TestRetryBackoffSurvivesRestart: a retry's due time is checkpointed like a Wait's.
func TestRetryBackoffSurvivesRestart(t *testing.T) {
	const def = `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"t","End":true,
		"Retry":[{"ErrorEquals":["States.ALL"],"IntervalSeconds":30,"MaxAttempts":1}]}}}`
	file := filepath.Join(t.TempDir(), "asl.db")
	var calls atomic.Int32
	tasks := TaskRegistry{"t": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			return nil, namedErr("Lambda.ServiceException")
		}
		return json.RawMessage(`1`), nil
	}}
	db := openDB(t, file)
	h := newHarnessOn(t, db, clock.NewFake(t0), tasks)
	h.define("sm", def)
	arn := h.start("sm", "ex", `{}`).ExecutionArn
	h.clock.BlockUntil(1)
	h.runner.Close()
	db.Close()

	db = openDB(t, file)
	defer db.Close()
	h = newHarnessOn(t, db, clock.NewFake(t0.Add(10*time.Second)), tasks)
	if _, err := h.runner.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.clock.BlockUntil(1)
	if d, _ := h.clock.AdvanceToNext(); d != 20*time.Second {
		t.Fatalf("retry resumed with %s left, want 20s", d)
	}
	if ex := h.await(arn); ex.Status != StatusSucceeded || calls.Load() != 2 {
		t.Fatalf("status %s after %d calls", ex.Status, calls.Load())
	}
}

// TestStartOfALeftOverExecutionRunsIt: a start that finds its execution running in the store
// but not in this runner (a previous process left it, and Resume has not reached it, or
// passed it by while the start held its place) runs it from its checkpoint, once. Before, the
// start answered success and nobody ran the execution: a local stack whose outbox redelivered
// a recovery start while it resumed could leave the recovery parked forever.
func TestStartOfALeftOverExecutionRunsIt(t *testing.T) {
	const def = `{"StartAt":"Wait","States":{
		"Wait":{"Type":"Wait","Seconds":3600,"Next":"Record"},
		"Record":{"Type":"Task","Resource":"record","ResultPath":"$.record","Next":"Done"},
		"Done":{"Type":"Succeed"}}}`
	file := filepath.Join(t.TempDir(), "asl.db")
	var records atomic.Int32
	tasks := TaskRegistry{"record": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		records.Add(1)
		return json.RawMessage(`"recorded"`), nil
	}}
	db := openDB(t, file)
	h := newHarnessOn(t, db, clock.NewFake(t0), tasks)
	h.define("recovery", def)
	arn := h.start("recovery", "inv_2-1", `{"invoice":"inv_2"}`).ExecutionArn
	h.clock.BlockUntil(1) // parked in the Wait
	h.runner.Close()
	db.Close()

	db = openDB(t, file)
	defer db.Close()
	h = newHarnessOn(t, db, clock.NewFake(t0.Add(2*time.Hour)), tasks)
	h.define("recovery", def)
	// The same start again, before any Resume: it runs the execution it finds.
	if ex := h.start("recovery", "inv_2-1", `{"invoice":"inv_2"}`); ex.ExecutionArn != arn {
		t.Fatalf("start answered %s, want %s", ex.ExecutionArn, arn)
	}
	if ex := h.await(arn); ex.Status != StatusSucceeded || records.Load() != 1 {
		t.Fatalf("the left-over execution: %s, record ran %d times", ex.Status, records.Load())
	}
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 0 {
		t.Fatalf("Resume after it finished = %d, %v", n, err)
	}
}
