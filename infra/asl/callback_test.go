package asl

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// callbackDef parks in a callback task that races its timeout: the callback's result lands in
// $.steer and goes to Steered; a timeout is caught (ResultPath null keeps the input) and goes to
// Timed; a failure named Steer.Stop goes to Stopped.
const callbackDef = `{"StartAt":"Park","States":{
	"Park":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken",
		"Parameters":{"FunctionName":"park","Payload":{"token.$":"$$.Task.Token","id.$":"$.id"}},
		"TimeoutSecondsPath":"$.wait_seconds","ResultPath":"$.steer",
		"Catch":[{"ErrorEquals":["States.Timeout"],"ResultPath":null,"Next":"Timed"},
			{"ErrorEquals":["Steer.Stop"],"ResultPath":"$.error","Next":"Stopped"}],
		"Next":"Steered"},
	"Steered":{"Type":"Succeed"},
	"Timed":{"Type":"Pass","Result":"timed out","ResultPath":"$.outcome","End":true},
	"Stopped":{"Type":"Succeed"}}}`

// parked records the tokens the park function was handed.
type parked struct {
	mu     sync.Mutex
	tokens []string
	got    chan string
}

func newParked() *parked { return &parked{got: make(chan string, 8)} }

func (p *parked) fn(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(in, &v); err != nil || v.Token == "" {
		return nil, &StatesError{Name: "Park.NoToken", Cause: string(in)}
	}
	p.mu.Lock()
	p.tokens = append(p.tokens, v.Token)
	p.mu.Unlock()
	p.got <- v.Token
	return json.RawMessage(`{"parked":true}`), nil
}

func TestCallbackTask(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		input string
		act   func(t *testing.T, h *harness, token string) // after the task parked
		want  string                                       // execution output
		last  string                                       // state that ended it
		types []string                                     // the Park state's task events
	}{
		"a callback before the timeout is the task's result": {
			input: `{"id":"a","wait_seconds":3600}`,
			act: func(t *testing.T, h *harness, token string) {
				h.clock.Advance(10 * time.Minute) // well inside the hour
				if err := h.runner.SendTaskSuccess(ctx, token, []byte(`{"action":"charge_now"}`)); err != nil {
					t.Fatal(err)
				}
				if err := h.runner.SendTaskSuccess(ctx, token, []byte(`{"action":"again"}`)); !errors.Is(err, ErrTaskTimedOut) {
					t.Fatalf("a second callback: %v, want ErrTaskTimedOut", err)
				}
			},
			want: `{"id":"a","wait_seconds":3600,"steer":{"action":"charge_now"}}`, last: "Steered",
			types: []string{"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded"},
		},
		"no callback: the timeout, counted from the entry, is caught": {
			input: `{"id":"b","wait_seconds":90}`,
			act: func(t *testing.T, h *harness, token string) {
				h.clock.BlockUntil(1)
				if d, _ := h.clock.AdvanceToNext(); d != 90*time.Second {
					t.Fatalf("timeout after %s, want 90s", d)
				}
			},
			want: `{"id":"b","wait_seconds":90,"outcome":"timed out"}`, last: "Timed",
			types: []string{"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskTimedOut"},
		},
		"a failure callback is matched by Catch": {
			input: `{"id":"c","wait_seconds":60}`,
			act: func(t *testing.T, h *harness, token string) {
				if err := h.runner.SendTaskFailure(ctx, token, "Steer.Stop", "operator stop"); err != nil {
					t.Fatal(err)
				}
			},
			want: `{"id":"c","wait_seconds":60,"error":{"Error":"Steer.Stop","Cause":"operator stop"}}`, last: "Stopped",
			types: []string{"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskFailed"},
		},
		"a callback after the timeout is refused": {
			input: `{"id":"d","wait_seconds":5}`,
			act: func(t *testing.T, h *harness, token string) {
				h.clock.BlockUntil(1)
				h.clock.Advance(5 * time.Second)
				h.await(h.runner.ExecutionArn("m", "d"))
				if err := h.runner.SendTaskSuccess(ctx, token, []byte(`{}`)); !errors.Is(err, ErrTaskTimedOut) {
					t.Fatalf("late callback: %v, want ErrTaskTimedOut", err)
				}
			},
			want: `{"id":"d","wait_seconds":5,"outcome":"timed out"}`, last: "Timed",
			types: []string{"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskTimedOut"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newParked()
			h := newHarness(t, TaskRegistry{"park": p.fn})
			h.define("m", callbackDef)
			var in struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal([]byte(tc.input), &in)
			arn := h.start("m", in.ID, tc.input).ExecutionArn
			token := <-p.got
			if !strings.HasPrefix(token, "tt1.") {
				t.Fatalf("token %q", token)
			}
			tc.act(t, h, token)
			ex := h.await(arn)
			if ex.Status != StatusSucceeded {
				t.Fatalf("status %s %s %s", ex.Status, ex.Error, ex.Cause)
			}
			jsonEqual(t, ex.Output, tc.want)
			evs := h.history(arn)
			var types []string
			for _, e := range evs {
				if strings.HasPrefix(e.Type, "Task") && e.StateName == "Park" && !strings.HasSuffix(e.Type, "StateEntered") && !strings.HasSuffix(e.Type, "StateExited") {
					types = append(types, e.Type)
				}
			}
			if !slices.Equal(types, tc.types) {
				t.Fatalf("Park events %v, want %v", types, tc.types)
			}
			if evs[len(evs)-2].StateName != tc.last {
				t.Fatalf("ended in %s, want %s", evs[len(evs)-2].StateName, tc.last)
			}
		})
	}
}

func TestCallbackTokenErrors(t *testing.T) {
	ctx := context.Background()
	p := newParked()
	h := newHarness(t, TaskRegistry{"park": p.fn})
	h.define("m", callbackDef)
	h.start("m", "e", `{"id":"e","wait_seconds":60}`)
	token := <-p.got
	for name, tc := range map[string]struct {
		token string
		want  error
	}{
		"garbage":                       {"nope", ErrInvalidToken},
		"not base64":                    {"tt1.!!.3", ErrInvalidToken},
		"too long":                      {"tt1." + strings.Repeat("a", 2000) + ".1", ErrInvalidToken},
		"an execution that never was":   {taskToken("arn:aws:states:local:000000000000:execution:m:zz", 3), ErrInvalidToken},
		"an earlier entry of the state": {taskToken(h.runner.ExecutionArn("m", "e"), 1), ErrTaskTimedOut},
	} {
		t.Run(name, func(t *testing.T) {
			if err := h.runner.SendTaskSuccess(ctx, tc.token, []byte(`{}`)); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	if err := h.runner.SendTaskSuccess(ctx, token, []byte(`not json`)); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("bad output: %v", err)
	}
	for name, def := range map[string]string{
		"TimeoutSecondsPath on a plain task": `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"park","TimeoutSecondsPath":"$.t","End":true}}}`,
		"both timeouts":                      `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken","TimeoutSeconds":3,"TimeoutSecondsPath":"$.t","End":true}}}`,
		"heartbeats":                         `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken","HeartbeatSeconds":3,"End":true}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(def)); !errors.Is(err, ErrInvalidDefinition) {
				t.Fatalf("%v, want an invalid definition", err)
			}
		})
	}
	t.Run("a timeout path that selects no positive integer fails the execution", func(t *testing.T) {
		arn := h.start("m", "f", `{"id":"f","wait_seconds":0}`).ExecutionArn
		if ex := h.await(arn); ex.Status != StatusFailed || ex.Error != ErrNameRuntime {
			t.Fatalf("%s %s %s", ex.Status, ex.Error, ex.Cause)
		}
	})
}

// TestCallbackSurvivesRestart: the process stops while a callback task waits; the next one
// resumes the same wait (same token, same timeout), and a callback sent after the restart
// completes it. The park function is not invoked again.
func TestCallbackSurvivesRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "asl.db")
	p := newParked()
	db := openDB(t, file)
	h := newHarnessOn(t, db, clock.NewFake(t0), TaskRegistry{"park": p.fn})
	h.define("m", callbackDef)
	arn := h.start("m", "r", `{"id":"r","wait_seconds":3600}`).ExecutionArn
	token := <-p.got
	h.clock.BlockUntil(1) // parked, its timeout armed and checkpointed
	h.runner.Close()
	db.Close()

	db = openDB(t, file)
	defer db.Close()
	h = newHarnessOn(t, db, clock.NewFake(t0.Add(20*time.Minute)), TaskRegistry{"park": p.fn})
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	h.clock.BlockUntil(1)
	if err := h.runner.SendTaskSuccess(context.Background(), token, []byte(`{"action":"stop"}`)); err != nil {
		t.Fatal(err)
	}
	ex := h.await(arn)
	jsonEqual(t, ex.Output, `{"id":"r","wait_seconds":3600,"steer":{"action":"stop"}}`)
	if len(p.tokens) != 1 {
		t.Fatalf("park ran %d times, want 1", len(p.tokens))
	}

	// A timeout resumes with what was left of it.
	p2 := newParked()
	db2 := openDB(t, filepath.Join(t.TempDir(), "asl2.db"))
	defer db2.Close()
	h2 := newHarnessOn(t, db2, clock.NewFake(t0), TaskRegistry{"park": p2.fn})
	h2.define("m", callbackDef)
	arn2 := h2.start("m", "s", `{"id":"s","wait_seconds":3600}`).ExecutionArn
	<-p2.got
	h2.clock.BlockUntil(1)
	h2.runner.Close()
	h3 := newHarnessOn(t, db2, clock.NewFake(t0.Add(50*time.Minute)), TaskRegistry{"park": p2.fn})
	if n, err := h3.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	h3.clock.BlockUntil(1)
	if d, _ := h3.clock.AdvanceToNext(); d != 10*time.Minute {
		t.Fatalf("the timeout resumed with %s left, want 10m", d)
	}
	jsonEqual(t, h3.await(arn2).Output, `{"id":"s","wait_seconds":3600,"outcome":"timed out"}`)
}
