package asl

import (
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/runtwice/twice/shared/clock"
	"math"
	"time"

	"context"
)

func cryptoRead(b []byte) { _, _ = cryptorand.Read(b) }

type taskResult struct {
	out json.RawMessage
	err error
}

// task runs a Task state: input processing, the call, then Retry, Catch or output
// processing. It returns an error only when the step must be abandoned without a
// checkpoint (the runner is closing), so the task runs again after Resume.
func (r *Runner) task(ctx context.Context, rec *Record, def *Definition, st *State, input, ctxObj any, events *[]HistoryEvent) error {
	eff, err := r.applyInputPath(st, input, ctxObj)
	if err == nil {
		eff, err = r.applyParameters(st, eff, ctxObj)
	}
	if err != nil {
		r.fail(rec, events, ErrorName(err), errCause(err))
		return nil
	}
	fnName, payload, wrap := st.Resource, eff, false
	if st.Resource == LambdaInvoke {
		params, _ := eff.(map[string]any)
		name, _ := params["FunctionName"].(string)
		if name == "" {
			r.fail(rec, events, ErrNameRuntime, "lambda:invoke needs Parameters.FunctionName")
			return nil
		}
		fnName, payload, wrap = name, params["Payload"], true
	}
	body, err := json.Marshal(payload)
	if err != nil {
		r.fail(rec, events, ErrNameRuntime, err.Error())
		return nil
	}
	r.emit(rec, events, HistoryEvent{Type: "TaskScheduled", StateName: st.Name, Resource: st.Resource, Input: body})

	var res taskResult
	if fn, ok := r.tasks.Lookup(fnName); !ok {
		res.err = &StatesError{Name: "Lambda.ResourceNotFoundException", Cause: "no function registered for " + fnName}
	} else {
		r.emit(rec, events, HistoryEvent{Type: "TaskStarted", StateName: st.Name, Resource: st.Resource})
		res = r.invoke(ctx, r.clockOf(rec), st, fn, body)
		if res.err != nil && ctx.Err() != nil {
			return ctx.Err() // stopping: not the task's failure; it runs again after Resume
		}
	}
	if res.err != nil {
		name := ErrorName(res.err)
		cause := errCause(res.err)
		var se *StatesError
		if !errors.As(res.err, &se) {
			cause = lambdaCause(name, res.err)
		}
		kind := "TaskFailed"
		if name == ErrNameTimeout {
			kind = "TaskTimedOut"
		}
		r.emit(rec, events, HistoryEvent{Type: kind, StateName: st.Name, Resource: st.Resource, Error: name, Cause: cause})
		r.handleError(rec, def, st, input, name, cause, events)
		return nil
	}
	result, err := decode(res.out)
	if len(res.out) == 0 {
		result, err = nil, nil
	}
	if err != nil {
		r.fail(rec, events, ErrNameRuntime, "task returned invalid JSON")
		return nil
	}
	if wrap {
		result = map[string]any{"ExecutedVersion": "$LATEST", "Payload": result, "StatusCode": float64(200)}
	}
	wire, _ := json.Marshal(result)
	r.emit(rec, events, HistoryEvent{Type: "TaskSucceeded", StateName: st.Name, Resource: st.Resource, Output: wire})
	out, err := r.taskOutput(st, input, result, ctxObj)
	if err != nil {
		r.handleError(rec, def, st, input, ErrorName(err), errCause(err), events)
		return nil
	}
	r.exit(rec, def, events, st, out)
	return nil
}

func (r *Runner) taskOutput(st *State, input, result, ctxObj any) (any, error) {
	var err error
	if st.resultSelector != nil {
		if result, err = st.resultSelector.eval(result, ctxObj); err != nil {
			return nil, err
		}
	}
	out, err := r.applyResult(st.resultPath, st.resultNull, input, result)
	if err != nil {
		return nil, err
	}
	return applyOutputPath(st, out, ctxObj)
}

// invoke calls fn with the state's timeout (on the execution's clock c), turning a panic into
// States.TaskFailed and an overrun into States.Timeout.
func (r *Runner) invoke(ctx context.Context, c clock.Clock, st *State, fn TaskFunc, body json.RawMessage) taskResult {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan taskResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- taskResult{err: &StatesError{Name: ErrNameTaskFailed, Cause: fmt.Sprintf("task panicked: %v", p)}}
			}
		}()
		out, err := fn(tctx, body)
		done <- taskResult{out: out, err: err}
	}()
	var timeout <-chan time.Time
	if st.TimeoutSeconds > 0 {
		t := c.NewTimer(time.Duration(st.TimeoutSeconds) * time.Second)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case res := <-done:
		return res
	case <-timeout:
		return taskResult{err: &StatesError{Name: ErrNameTimeout, Cause: fmt.Sprintf("task did not finish within %d s", st.TimeoutSeconds)}}
	case <-ctx.Done():
		// Closing: give the task a moment to return so a finished result is checkpointed.
		select {
		case res := <-done:
			return res
		case <-time.After(r.closeGrace):
			return taskResult{err: ctx.Err()}
		}
	}
}

func errorMatches(list []string, name string) bool {
	for _, e := range list {
		if e == name || e == ErrNameAll || (e == ErrNameTaskFailed && name != ErrNameTimeout) {
			return true
		}
	}
	return false
}

// handleError applies the first matching Retrier, else the first matching Catcher, else
// fails the execution. States.Runtime is neither retried nor caught, as in AWS.
func (r *Runner) handleError(rec *Record, def *Definition, st *State, rawInput any, name, cause string, events *[]HistoryEvent) {
	if name == ErrNameRuntime {
		r.fail(rec, events, name, cause)
		return
	}
	for i, rt := range st.Retry {
		if !errorMatches(rt.ErrorEquals, name) {
			continue
		}
		if len(rec.Cursor.RetryCounts) < len(st.Retry) {
			counts := make([]int, len(st.Retry))
			copy(counts, rec.Cursor.RetryCounts)
			rec.Cursor.RetryCounts = counts
		}
		attempt := rec.Cursor.RetryCounts[i]
		if attempt >= rt.MaxAttempts {
			break
		}
		delay := r.backoff(rt, attempt)
		rec.Cursor.RetryCounts[i]++
		rec.Cursor.RetryCount++
		pauseClock(rec) // the backoff passes on the runner's clock (retryPause)
		rec.Cursor.DueTime = r.clockOf(rec).Now().Add(delay)
		rec.StateTransitions++
		r.log.Info("asl: retry scheduled", "execution", rec.ExecutionArn, "state", st.Name,
			"error", name, "attempt", attempt+1, "delay", delay)
		return
	}
	for _, c := range st.Catch {
		if !errorMatches(c.ErrorEquals, name) {
			continue
		}
		var next any = rawInput
		var err error
		if !c.resultNull {
			errOut := map[string]any{"Error": name, "Cause": cause}
			if c.resultPath == nil {
				next = errOut
			} else if next, err = c.resultPath.set(rawInput, errOut); err != nil {
				r.fail(rec, events, ErrorName(err), errCause(err))
				return
			}
		}
		b, _ := json.Marshal(next)
		r.emit(rec, events, HistoryEvent{Type: st.Type + "StateExited", StateName: st.Name, Output: b})
		r.log.Info("asl: error caught", "execution", rec.ExecutionArn, "state", st.Name, "error", name, "next", c.Next)
		r.enter(rec, def, events, c.Next, b)
		return
	}
	r.fail(rec, events, name, cause)
}

// backoff is IntervalSeconds * BackoffRate^attempt, capped by MaxDelaySeconds, and with
// JitterStrategy FULL a uniform draw from [0, that).
func (r *Runner) backoff(rt Retrier, attempt int) time.Duration {
	secs := rt.IntervalSeconds * math.Pow(rt.BackoffRate, float64(attempt))
	if rt.MaxDelaySeconds > 0 && secs > rt.MaxDelaySeconds {
		secs = rt.MaxDelaySeconds
	}
	if rt.JitterStrategy == "FULL" {
		r.rndMu.Lock()
		secs *= r.rnd.Float64()
		r.rndMu.Unlock()
	}
	return time.Duration(secs * float64(time.Second))
}
