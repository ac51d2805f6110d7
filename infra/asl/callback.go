package asl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// LambdaInvokeWaitForTaskToken is the Lambda integration's callback pattern: the function is
// invoked with $$.Task.Token in its payload and returns at once; the state then waits until
// someone calls SendTaskSuccess or SendTaskFailure with that token, or until the state's
// TimeoutSeconds (or TimeoutSecondsPath) passes, which fails it with States.Timeout. The
// local runner supports exactly this: a token per state entry, kept in the checkpoint with the
// moment the wait times out, so a killed process resumes the same wait and a callback sent
// after the restart still finds it. HeartbeatSeconds is not supported (nothing here uses it).
const LambdaInvokeWaitForTaskToken = "arn:aws:states:::lambda:invoke.waitForTaskToken"

// Errors of SendTaskSuccess and SendTaskFailure (AWS's InvalidToken and TaskTimedOut).
var (
	// ErrInvalidToken: the token is not one this runner hands out.
	ErrInvalidToken = errors.New("asl: invalid task token")
	// ErrTaskTimedOut: the token's task is no longer waiting (it timed out, was already
	// completed, or its execution ended).
	ErrTaskTimedOut = errors.New("asl: task timed out or already completed")
)

// maxTokenLength is AWS's limit on a task token.
const maxTokenLength = 1024

// taskToken names one entry of one state: the execution's ARN and the id of the event that
// entered the state, so that a token from an earlier visit of the same state is stale.
func taskToken(arn string, entered int64) string {
	return "tt1." + base64.RawURLEncoding.EncodeToString([]byte(arn)) + "." + strconv.FormatInt(entered, 10)
}

func parseToken(token string) (arn string, err error) {
	parts := strings.Split(token, ".")
	if len(token) > maxTokenLength || len(parts) != 3 || parts[0] != "tt1" {
		return "", ErrInvalidToken
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(b) == 0 {
		return "", ErrInvalidToken
	}
	if _, err := strconv.ParseInt(parts[2], 10, 64); err != nil {
		return "", ErrInvalidToken
	}
	return string(b), nil
}

// callback is a SendTaskSuccess (Output) or SendTaskFailure (Error, Cause) on its way to the
// execution's goroutine, which answers on reply once the outcome is checkpointed.
type callback struct {
	token        string
	output       json.RawMessage
	error, cause string
	failed       bool
	reply        chan error
}

// callbacks returns the rendezvous channel of an execution's callbacks.
func (r *Runner) callbacks(arn string) chan callback {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == nil {
		r.waiting = map[string]chan callback{}
	}
	ch := r.waiting[arn]
	if ch == nil {
		ch = make(chan callback)
		r.waiting[arn] = ch
	}
	return ch
}

func (r *Runner) forgetCallbacks(arn string) {
	r.mu.Lock()
	delete(r.waiting, arn)
	r.mu.Unlock()
}

// SendTaskSuccess completes the waiting task the token names with output (a JSON document),
// which becomes the task's result. It returns once the outcome is checkpointed.
func (r *Runner) SendTaskSuccess(ctx context.Context, token string, output []byte) error {
	if !json.Valid(output) {
		return fmt.Errorf("%w: output is not JSON", ErrInvalidInput)
	}
	return r.send(ctx, callback{token: token, output: output})
}

// SendTaskFailure fails the waiting task the token names with an error name and cause, which
// its Retry and Catch match like any task error.
func (r *Runner) SendTaskFailure(ctx context.Context, token, errName, cause string) error {
	return r.send(ctx, callback{token: token, error: errName, cause: cause, failed: true})
}

// sendPoll is how often a sender re-reads the checkpoint while it waits for the execution's
// goroutine to take its callback: the task may time out meanwhile.
const sendPoll = 50 * time.Millisecond

func (r *Runner) send(ctx context.Context, cb callback) error {
	arn, err := parseToken(cb.token)
	if err != nil {
		return err
	}
	cb.reply = make(chan error, 1)
	ch := r.callbacks(arn)
	for {
		rec, err := r.store.Load(ctx, arn)
		if errors.Is(err, ErrExecutionDoesNotExist) {
			return ErrInvalidToken
		}
		if err != nil {
			return err
		}
		if rec.Status != StatusRunning || rec.Cursor.Token != cb.token {
			return ErrTaskTimedOut
		}
		t := time.NewTimer(sendPoll)
		select {
		case ch <- cb:
			t.Stop()
			select {
			case err := <-cb.reply:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-r.ctx.Done():
			t.Stop()
			return ErrClosed
		}
	}
}

// timeoutOf is the callback task's timeout in whole seconds from its effective input
// (TimeoutSecondsPath) or its definition; 0: none.
func (r *Runner) timeoutOf(st *State, eff, ctxObj any) (int64, error) {
	if st.timeoutSecondsPath == nil {
		return int64(st.TimeoutSeconds), nil
	}
	v, err := st.timeoutSecondsPath.eval(eff, ctxObj)
	f, ok := v.(float64)
	if err != nil || !ok || f < 1 || f != math.Trunc(f) || f > 99999999 {
		return 0, runtimeErr(ErrNameRuntime, "TimeoutSecondsPath %s must select a positive integer", st.timeoutSecondsPath.src)
	}
	return int64(f), nil
}

// await waits, on the execution's clock and holding no concurrency slot, for the callback of
// the task the cursor waits in, or for its timeout; then it records the outcome (the task's
// result, its error for Retry and Catch, or States.Timeout) and checkpoints, and answers the
// sender after the checkpoint.
func (r *Runner) await(ctx context.Context, rec *Record, def *Definition, st *State) error {
	ch := r.callbacks(rec.ExecutionArn)
	c := r.clockOf(rec)
	var got *callback
	for got == nil {
		var timeout <-chan time.Time
		if due := rec.Cursor.DueTime; !due.IsZero() {
			d := due.Sub(c.Now())
			if d <= 0 {
				break
			}
			t := c.NewTimer(d)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case cb := <-ch:
			if cb.token != rec.Cursor.Token {
				cb.reply <- ErrTaskTimedOut
				continue
			}
			got = &cb
		case <-timeout:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	input, err := decode(rec.Cursor.Input)
	if err != nil {
		return fmt.Errorf("asl: checkpointed input: %w", err)
	}
	var events []HistoryEvent
	rec.Cursor.Awaiting, rec.Cursor.DueTime = false, time.Time{}
	switch {
	case got == nil:
		cause := "the task's callback did not arrive within its timeout"
		r.emit(rec, &events, HistoryEvent{Type: "TaskTimedOut", StateName: st.Name, Resource: st.Resource, Error: ErrNameTimeout, Cause: cause})
		r.handleError(rec, def, st, input, ErrNameTimeout, cause, &events)
	case got.failed:
		r.emit(rec, &events, HistoryEvent{Type: "TaskFailed", StateName: st.Name, Resource: st.Resource, Error: got.error, Cause: got.cause})
		r.handleError(rec, def, st, input, got.error, got.cause, &events)
	default:
		result, err := decode(got.output)
		if err != nil {
			r.fail(rec, &events, ErrNameRuntime, "task callback output is not JSON")
			break
		}
		r.emit(rec, &events, HistoryEvent{Type: "TaskSucceeded", StateName: st.Name, Resource: st.Resource, Output: got.output})
		out, err := r.taskOutput(st, input, result, r.contextObject(rec))
		if err != nil {
			r.handleError(rec, def, st, input, ErrorName(err), errCause(err), &events)
			break
		}
		r.exit(rec, def, &events, st, out)
	}
	err = r.store.Save(context.WithoutCancel(ctx), rec, events)
	if got != nil {
		got.reply <- err
	}
	return err
}
