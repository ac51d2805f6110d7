package asl

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/clock"
)

// Status is an execution's status, as DescribeExecution reports it.
type Status string

// Execution statuses.
const (
	StatusRunning   Status = "RUNNING"
	StatusSucceeded Status = "SUCCEEDED"
	StatusFailed    Status = "FAILED"
)

// Execution is what DescribeExecution returns.
type Execution struct {
	ExecutionArn    string          `json:"executionArn"`
	StateMachineArn string          `json:"stateMachineArn"`
	StateMachine    string          `json:"stateMachine"`
	Name            string          `json:"name"`
	Status          Status          `json:"status"`
	Input           json.RawMessage `json:"input"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	Cause           string          `json:"cause,omitempty"`
	StartDate       time.Time       `json:"startDate"`
	StopDate        time.Time       `json:"stopDate,omitzero"`
	// StateTransitions counts billed transitions: every state entered and every retry.
	StateTransitions int `json:"stateTransitions"`
}

// HistoryEvent is one GetExecutionHistory event.
type HistoryEvent struct {
	ID              int64           `json:"id"`
	PreviousEventID int64           `json:"previousEventId"`
	Timestamp       time.Time       `json:"timestamp"`
	Type            string          `json:"type"`
	StateName       string          `json:"name,omitempty"`
	Resource        string          `json:"resource,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	Cause           string          `json:"cause,omitempty"`
}

// TaskFunc runs a Task resource. It may run more than once for one state entry (a crash
// between its return and the checkpoint re-runs it), so it must be idempotent.
type TaskFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// Tasks finds the function for a Task resource: a Lambda function ARN (or, for
// arn:aws:states:::lambda:invoke, the FunctionName parameter).
type Tasks interface {
	Lookup(resource string) (TaskFunc, bool)
}

// TaskRegistry is the Tasks keyed by resource string. A function ARN
// (arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]) is also found by NAME.
type TaskRegistry map[string]TaskFunc

var _ Tasks = TaskRegistry(nil)

// Lookup implements Tasks.
func (t TaskRegistry) Lookup(resource string) (TaskFunc, bool) {
	if fn, ok := t[resource]; ok {
		return fn, true
	}
	if _, rest, ok := strings.Cut(resource, ":function:"); ok {
		name, _, _ := strings.Cut(rest, ":")
		fn, ok := t[name]
		return fn, ok
	}
	return nil, false
}

// LambdaInvoke is the optimised Lambda integration's resource.
const LambdaInvoke = "arn:aws:states:::lambda:invoke"

// Option configures a Runner.
type Option func(*Runner)

// WithClock sets the clock (default: the wall clock).
func WithClock(c clock.Clock) Option { return func(r *Runner) { r.clock = c } }

// WithTimeFactor gives every execution its own clock that starts at the runner clock's time
// when the execution starts and runs factor times faster from there (a local stack's
// recovery demo: a Wait of days takes seconds, and each execution's timeline begins at its
// own start, however long the runner has been up). The clock is kept with the execution, so a
// resumed one continues its timeline; a runner with another factor continues it at the new
// rate without a jump. 1 or less: every execution runs on the runner's clock.
func WithTimeFactor(factor float64) Option { return func(r *Runner) { r.factor = factor } }

// WithRand sets the jitter source (default: seeded from crypto/rand).
func WithRand(rnd *rand.Rand) Option { return func(r *Runner) { r.rnd = rnd } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

// WithConcurrency bounds how many execution steps (transitions and running tasks) run at
// once; executions that are waiting hold no slot. Default 16.
func WithConcurrency(n int) Option {
	return func(r *Runner) {
		if n > 0 {
			r.sem = make(chan struct{}, n)
		}
	}
}

// WithARNPrefix sets the "arn:aws:states:REGION:ACCOUNT" prefix of the ARNs it makes.
func WithARNPrefix(p string) Option { return func(r *Runner) { r.arnPrefix = p } }

// WithCloseGrace sets how long Close waits for a cancelled task to return (default 5 s of
// wall time) before it abandons the step; the task then runs again after Resume.
func WithCloseGrace(d time.Duration) Option { return func(r *Runner) { r.closeGrace = d } }

// Runner interprets state machines and persists every transition.
type Runner struct {
	store      Store
	tasks      Tasks
	clock      clock.Clock
	factor     float64 // WithTimeFactor; <= 1: none
	log        *slog.Logger
	sem        chan struct{}
	arnPrefix  string
	closeGrace time.Duration

	rndMu sync.Mutex
	rnd   *rand.Rand

	mu       sync.Mutex
	machines map[string]string      // name -> definition hash
	defs     map[string]*Definition // hash -> parsed
	raw      map[string][]byte      // hash -> definition
	active   map[string]chan struct{}
	closed   bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Runner over store, resolving Task resources through tasks. Call Define for
// each state machine, then Resume to pick up executions a previous process left running.
func New(store Store, tasks Tasks, opts ...Option) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{
		store: store, tasks: tasks, clock: clock.Real(), log: slog.Default(),
		sem: make(chan struct{}, 16), arnPrefix: "arn:aws:states:local:000000000000",
		closeGrace: 5 * time.Second,
		machines:   map[string]string{}, defs: map[string]*Definition{}, raw: map[string][]byte{},
		active: map[string]chan struct{}{}, ctx: ctx, cancel: cancel,
	}
	for _, o := range opts {
		o(r)
	}
	if r.rnd == nil {
		r.rnd = rand.New(rand.NewChaCha8(seed()))
	}
	return r
}

// Define parses and validates a definition (already substituted) and makes it the current
// version of the named state machine. Running executions keep the version they started with.
func (r *Runner) Define(name string, definition []byte) error {
	if err := validName(name); err != nil {
		return err
	}
	def, err := Parse(definition)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(definition)
	hash := hex.EncodeToString(sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.machines[name] = hash
	r.defs[hash] = def
	r.raw[hash] = bytes.Clone(definition)
	return nil
}

// StateMachineArn returns the ARN the runner gives a state machine.
func (r *Runner) StateMachineArn(stateMachine string) string {
	return r.arnPrefix + ":stateMachine:" + stateMachine
}

// ExecutionArn returns the ARN of the named execution.
func (r *Runner) ExecutionArn(stateMachine, name string) string {
	return r.arnPrefix + ":execution:" + stateMachine + ":" + name
}

// validName applies AWS's rules for execution and state machine names.
func validName(name string) error {
	if n := utf8.RuneCountInString(name); n == 0 || n > 80 || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q must be 1-80 characters", ErrInvalidName, name)
	}
	for _, c := range name {
		if c <= 0x20 || (c >= 0x7f && c <= 0x9f) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", c) ||
			c == 0x85 || c == 0xa0 || c == 0x2028 || c == 0x2029 || c == 0x3000 {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidName, name, c)
		}
	}
	return nil
}

// StartExecution starts an execution. Like AWS: the same name and input as a RUNNING
// execution returns that execution; otherwise a taken name is ErrExecutionAlreadyExists.
func (r *Runner) StartExecution(ctx context.Context, stateMachine, name string, input []byte) (Execution, error) {
	return r.StartExecutionAt(ctx, stateMachine, name, input, time.Time{})
}

// StartExecutionAt is StartExecution for an execution that continues a workflow's timeline:
// under WithTimeFactor its own clock starts at at instead of at the runner clock's time (a
// recovery resumed after a wait goes on from the moment it waited for). A zero at, or a runner
// without a time factor, starts it as StartExecution does.
func (r *Runner) StartExecutionAt(ctx context.Context, stateMachine, name string, input []byte, at time.Time) (Execution, error) {
	if err := validName(name); err != nil {
		return Execution{}, err
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, input); err != nil {
		return Execution{}, fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	r.mu.Lock()
	hash, ok := r.machines[stateMachine]
	def := r.defs[hash]
	raw := r.raw[hash]
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return Execution{}, ErrClosed
	}
	if !ok {
		return Execution{}, fmt.Errorf("%w: %s", ErrStateMachineDoesNotExist, stateMachine)
	}
	now := r.clock.Now()
	rec := &Record{
		Clock: r.executionClock(cmp.Or(at, now)),
		Execution: Execution{
			ExecutionArn: r.ExecutionArn(stateMachine, name), StateMachineArn: r.StateMachineArn(stateMachine),
			StateMachine: stateMachine, Name: name, Status: StatusRunning, Input: compact.Bytes(), StartDate: now,
		},
		DefinitionHash: hash,
	}
	var events []HistoryEvent
	r.emit(rec, &events, HistoryEvent{Type: "ExecutionStarted", Input: rec.Input})
	r.enter(rec, def, &events, def.StartAt, rec.Input)
	// Hold the execution's place among the active ones before it is visible in the store, so
	// that AwaitExecution on an execution just listed waits for it rather than answering at once.
	done, reserved := r.reserve(rec.ExecutionArn)
	existing, err := r.store.Create(ctx, rec, events, raw)
	if err != nil || (existing != nil && !(existing.Status == StatusRunning && bytes.Equal(existing.Input, rec.Input))) {
		r.release(rec.ExecutionArn, done, reserved)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("asl: start %s: %w", rec.ExecutionArn, err)
	}
	if existing != nil {
		if existing.Status == StatusRunning && bytes.Equal(existing.Input, rec.Input) {
			if reserved {
				// Running in the store but not in this runner: a previous process left it, and
				// Resume has not reached it (or met this start's reservation and passed it
				// by). Run it from its checkpoint, as Resume would, or nobody runs it.
				return r.adopt(ctx, existing, done)
			}
			return existing.Execution, nil
		}
		return Execution{}, fmt.Errorf("%w: %s", ErrExecutionAlreadyExists, rec.ExecutionArn)
	}
	r.log.Info("asl: execution started", "execution", rec.ExecutionArn)
	view := rec.Execution // rec belongs to the execution's goroutine from here on
	if rec.Status == StatusRunning && reserved {
		r.run(rec, def, done)
	} else {
		r.release(rec.ExecutionArn, done, reserved)
	}
	return view, nil
}

// adopt runs a reserved execution that a previous process left running, from its checkpoint.
func (r *Runner) adopt(ctx context.Context, rec *Record, done chan struct{}) (Execution, error) {
	def, err := r.definition(ctx, rec.DefinitionHash)
	if err != nil {
		r.release(rec.ExecutionArn, done, true)
		return Execution{}, err
	}
	view := rec.Execution // rec belongs to its goroutine once run
	r.adoptFactor(rec)
	r.log.Info("asl: execution resumed", "execution", rec.ExecutionArn, "state", rec.Cursor.State)
	r.run(rec, def, done)
	return view, nil
}

// reserve registers arn as active before its execution runs; reserved is false when it is
// active already (or the runner is closed).
func (r *Runner) reserve(arn string) (chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.active[arn] != nil {
		return nil, false
	}
	done := make(chan struct{})
	r.active[arn] = done
	return done, true
}

// release gives up a reservation that will not run.
func (r *Runner) release(arn string, done chan struct{}, reserved bool) {
	if !reserved {
		return
	}
	r.mu.Lock()
	if r.active[arn] == done {
		delete(r.active, arn)
	}
	r.mu.Unlock()
	close(done)
}

// DescribeExecution returns an execution's current view.
func (r *Runner) DescribeExecution(ctx context.Context, executionArn string) (Execution, error) {
	rec, err := r.store.Load(ctx, executionArn)
	if err != nil {
		return Execution{}, err
	}
	return rec.Execution, nil
}

// GetExecutionHistory returns an execution's events, oldest first.
func (r *Runner) GetExecutionHistory(ctx context.Context, executionArn string) ([]HistoryEvent, error) {
	return r.store.History(ctx, executionArn)
}

// ListExecutions returns the executions of a state machine ("" for all).
func (r *Runner) ListExecutions(ctx context.Context, stateMachine string) ([]Execution, error) {
	recs, err := r.store.List(ctx, stateMachine)
	if err != nil {
		return nil, err
	}
	out := make([]Execution, len(recs))
	for i, rec := range recs {
		out[i] = rec.Execution
	}
	return out, nil
}

// Resume picks up every RUNNING execution in the store that this runner is not already
// running, at the state it was checkpointed in, and returns how many it resumed.
func (r *Runner) Resume(ctx context.Context) (int, error) {
	recs, err := r.store.Running(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		def, err := r.definition(ctx, rec.DefinitionHash)
		if err != nil {
			return n, err
		}
		arn, state := rec.ExecutionArn, rec.Cursor.State // rec belongs to its goroutine once launched
		r.adoptFactor(rec)
		if r.launch(rec, def) {
			n++
			r.log.Info("asl: execution resumed", "execution", arn, "state", state)
		}
	}
	return n, nil
}

func (r *Runner) definition(ctx context.Context, hash string) (*Definition, error) {
	r.mu.Lock()
	def := r.defs[hash]
	r.mu.Unlock()
	if def != nil {
		return def, nil
	}
	raw, err := r.store.Definition(ctx, hash)
	if err != nil {
		return nil, err
	}
	if def, err = Parse(raw); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.defs[hash] = def
	r.mu.Unlock()
	return def, nil
}

// AwaitExecution blocks until the execution is no longer running in this runner (it
// finished, or the runner closed) and returns its view.
func (r *Runner) AwaitExecution(ctx context.Context, executionArn string) (Execution, error) {
	r.mu.Lock()
	done := r.active[executionArn]
	r.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return Execution{}, ctx.Err()
		}
	}
	return r.DescribeExecution(ctx, executionArn)
}

// Close stops every execution at its last checkpoint and waits for running steps to
// finish or be abandoned. It does not close the store.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

func (r *Runner) launch(rec *Record, def *Definition) bool {
	done, ok := r.reserve(rec.ExecutionArn)
	if !ok {
		return false
	}
	r.run(rec, def, done)
	return true
}

// run runs a reserved execution on its own goroutine until it stops or the runner closes.
func (r *Runner) run(rec *Record, def *Definition, done chan struct{}) {
	r.mu.Lock()
	if r.closed { // Close came between the reservation and now: Resume picks it up later
		r.mu.Unlock()
		r.release(rec.ExecutionArn, done, true)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer r.release(rec.ExecutionArn, done, true)
		r.steps(rec, def)
	}()
}

func (r *Runner) steps(rec *Record, def *Definition) {
	for rec.Status == StatusRunning {
		if err := r.step(r.ctx, rec, def); err != nil {
			if r.ctx.Err() == nil {
				r.log.Error("asl: step failed; the execution stays at its last checkpoint",
					"execution", rec.ExecutionArn, "state", rec.Cursor.State, "err", err)
			}
			return
		}
	}
}

// emit appends an event, chaining ids the way GetExecutionHistory does.
func (r *Runner) emit(rec *Record, events *[]HistoryEvent, e HistoryEvent) {
	e.PreviousEventID = rec.NextEventID
	rec.NextEventID++
	e.ID = rec.NextEventID
	e.Timestamp = r.clockOf(rec).Now()
	*events = append(*events, e)
}

// enter moves the cursor into a state. A Wait computes its due time here, so the one
// checkpoint that records the entry also records when the Wait ends.
func (r *Runner) enter(rec *Record, def *Definition, events *[]HistoryEvent, name string, input json.RawMessage) {
	st := def.States[name]
	now := r.clockOf(rec).Now()
	rec.Cursor = Cursor{State: name, Input: input, EnteredTime: now}
	rec.StateTransitions++
	r.emit(rec, events, HistoryEvent{Type: st.Type + "StateEntered", StateName: name, Input: input})
	if st.Type != "Wait" {
		return
	}
	due, err := r.waitDue(rec, st, now)
	if err != nil {
		r.fail(rec, events, ErrorName(err), errCause(err))
		return
	}
	rec.Cursor.DueTime = due
}

func errCause(err error) string {
	var se *StatesError
	if errors.As(err, &se) {
		return se.Cause
	}
	return err.Error()
}

func (r *Runner) waitDue(rec *Record, st *State, now time.Time) (time.Time, error) {
	input, err := decode(rec.Cursor.Input)
	if err != nil {
		return time.Time{}, runtimeErr(ErrNameRuntime, "bad input: %v", err)
	}
	eff, err := r.applyInputPath(st, input, r.contextObject(rec))
	if err != nil {
		return time.Time{}, err
	}
	switch {
	case st.seconds != nil:
		return now.Add(time.Duration(*st.seconds) * time.Second), nil
	case st.timestamp != "":
		return parseTimestamp(st.timestamp)
	case st.secondsPath != nil:
		v, err := st.secondsPath.eval(eff, r.contextObject(rec))
		f, ok := v.(float64)
		if err != nil || !ok || f < 0 || f != math.Trunc(f) {
			return time.Time{}, runtimeErr(ErrNameRuntime, "SecondsPath %s must select a non-negative integer", st.secondsPath.src)
		}
		return now.Add(time.Duration(f) * time.Second), nil
	default:
		v, err := st.timestampPath.eval(eff, r.contextObject(rec))
		s, ok := v.(string)
		if err != nil || !ok {
			return time.Time{}, runtimeErr(ErrNameRuntime, "TimestampPath %s must select a timestamp", st.timestampPath.src)
		}
		t, err := parseTimestamp(s)
		if err != nil {
			return time.Time{}, runtimeErr(ErrNameRuntime, "TimestampPath %s: %v", st.timestampPath.src, err)
		}
		return t, nil
	}
}

// exit leaves the current state with output: to its Next state, or ends the execution.
func (r *Runner) exit(rec *Record, def *Definition, events *[]HistoryEvent, st *State, output any) {
	out, err := json.Marshal(output)
	if err != nil {
		r.fail(rec, events, ErrNameRuntime, err.Error())
		return
	}
	r.emit(rec, events, HistoryEvent{Type: st.Type + "StateExited", StateName: st.Name, Output: out})
	if st.End || st.Type == "Succeed" {
		rec.Status = StatusSucceeded
		rec.Output = out
		rec.StopDate = r.clockOf(rec).Now()
		rec.Cursor.DueTime = time.Time{}
		r.emit(rec, events, HistoryEvent{Type: "ExecutionSucceeded", Output: out})
		r.log.Info("asl: execution succeeded", "execution", rec.ExecutionArn, "transitions", rec.StateTransitions)
		return
	}
	r.enter(rec, def, events, st.Next, out)
}

func (r *Runner) fail(rec *Record, events *[]HistoryEvent, name, cause string) {
	rec.Status = StatusFailed
	rec.Error, rec.Cause = name, cause
	rec.StopDate = r.clockOf(rec).Now()
	rec.Cursor.DueTime = time.Time{}
	r.emit(rec, events, HistoryEvent{Type: "ExecutionFailed", Error: name, Cause: cause})
	r.log.Warn("asl: execution failed", "execution", rec.ExecutionArn, "error", name, "transitions", rec.StateTransitions)
}

const contextTimeFormat = "2006-01-02T15:04:05.000Z"

func (r *Runner) contextObject(rec *Record) any {
	input, _ := decode(rec.Input)
	return r.contextObjectWithoutTask(rec, input)
}

func (r *Runner) contextObjectWithoutTask(rec *Record, input any) map[string]any {
	return map[string]any{
		"Execution": map[string]any{
			"Id": rec.ExecutionArn, "Name": rec.Name, "Input": input,
			"StartTime": rec.StartDate.UTC().Format(contextTimeFormat),
		},
		"StateMachine": map[string]any{"Id": rec.StateMachineArn, "Name": rec.StateMachine},
		"State": map[string]any{
			"Name": rec.Cursor.State, "EnteredTime": rec.Cursor.EnteredTime.UTC().Format(contextTimeFormat),
			"RetryCount": float64(rec.Cursor.RetryCount),
		},
	}
}

// executionClock is the clock of an execution starting at now: its own accelerated one
// under WithTimeFactor, else nil (the runner's).
func (r *Runner) executionClock(now time.Time) *clock.Accelerated {
	if r.factor <= 1 {
		return nil
	}
	return &clock.Accelerated{Base: now, Anchor: time.Now(), Factor: r.factor}
}

// clockOf is the clock an execution runs on.
func (r *Runner) clockOf(rec *Record) clock.Clock {
	if rec.Clock != nil {
		return rec.Clock
	}
	return r.clock
}

// adoptFactor continues a resumed execution's own clock at this runner's factor, from the
// time it has reached, so that a restart with another factor neither jumps nor stalls.
func (r *Runner) adoptFactor(rec *Record) {
	// A paused clock (Factor 0: a Task waits for its retry) stays paused; retryPause restarts it.
	if f := max(r.factor, 1); rec.Clock != nil && rec.Clock.Factor != 0 && rec.Clock.Factor != f {
		rec.Clock = rec.Clock.Rebase(time.Now(), f)
	}
}

// retryPause waits out a Task's retry backoff. A Retry waits for the service or the provider
// behind the task to recover, which happens in the runner clock's time, not in an execution's
// faster one: under WithTimeFactor the backoff lasts its length on the runner's clock, and the
// execution's own clock then goes on from the due time (it moved by the backoff, not by the
// backoff times the factor). Without a clock of its own this is sleepUntil.
func (r *Runner) retryPause(ctx context.Context, rec *Record, due time.Time) error {
	if rec.Clock == nil || rec.Clock.Factor != 0 {
		return r.sleepUntil(ctx, rec, due)
	}
	// handleError stopped the execution's clock at the failure (Factor 0): the backoff is
	// what is left to due.
	if d := due.Sub(rec.Clock.Base); d > 0 {
		t := r.clock.NewTimer(d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	rec.Clock = &clock.Accelerated{Base: due, Anchor: time.Now(), Factor: max(r.factor, 1)}
	return nil
}

// pauseClock stops an execution's own clock where it is while a Task waits to be retried.
func pauseClock(rec *Record) {
	if rec.Clock != nil {
		now := rec.Clock.Now()
		rec.Clock = &clock.Accelerated{Base: now, Anchor: time.Now(), Factor: 0}
	}
}

// sleepUntil waits on the execution's clock until due; it loops because an accelerated clock
// may wake a hair early.
func (r *Runner) sleepUntil(ctx context.Context, rec *Record, due time.Time) error {
	c := r.clockOf(rec)
	for {
		d := due.Sub(c.Now())
		if d <= 0 {
			return nil
		}
		t := c.NewTimer(d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// step runs the state under the cursor to its next checkpoint.
func (r *Runner) step(ctx context.Context, rec *Record, def *Definition) error {
	st := def.States[rec.Cursor.State]
	if st == nil {
		return fmt.Errorf("asl: state %q not in definition %s", rec.Cursor.State, rec.DefinitionHash)
	}
	if !rec.Cursor.DueTime.IsZero() {
		wait := r.sleepUntil
		if st.Type == "Task" {
			wait = r.retryPause
		}
		if err := wait(ctx, rec, rec.Cursor.DueTime); err != nil {
			return err
		}
	}
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	input, err := decode(rec.Cursor.Input)
	if err != nil {
		return fmt.Errorf("asl: checkpointed input: %w", err)
	}
	ctxObj := r.contextObject(rec)
	var events []HistoryEvent
	if st.Type == "Task" {
		if err := r.task(ctx, rec, def, st, input, ctxObj, &events); err != nil {
			return err
		}
	} else if err := r.flow(rec, def, st, input, ctxObj, &events); err != nil {
		r.fail(rec, &events, ErrorName(err), errCause(err))
	}
	// Pass, Choice, Succeed and Fail touch nothing outside the execution, so they share the
	// checkpoint of the step before them: what must be durable is every transition before
	// the next side effect (a Task call) or wait, and a crash here just repeats pure work.
	for n := 0; n < maxCoalesced && rec.Status == StatusRunning; n++ {
		next := def.States[rec.Cursor.State]
		if next.Type == "Task" || next.Type == "Wait" {
			break
		}
		input, err := decode(rec.Cursor.Input)
		if err != nil {
			return fmt.Errorf("asl: state input: %w", err)
		}
		if err := r.flow(rec, def, next, input, r.contextObject(rec), &events); err != nil {
			r.fail(rec, &events, ErrorName(err), errCause(err))
		}
	}
	return r.store.Save(context.WithoutCancel(ctx), rec, events)
}

// maxCoalesced bounds how many pure transitions share one checkpoint, so a loop of Pass
// and Choice states still makes durable progress.
const maxCoalesced = 64

// flow runs the states that do no outside work.
func (r *Runner) flow(rec *Record, def *Definition, st *State, input, ctxObj any, events *[]HistoryEvent) error {
	eff, err := r.applyInputPath(st, input, ctxObj)
	if err != nil {
		return err
	}
	switch st.Type {
	case "Pass":
		if eff, err = r.applyParameters(st, eff, ctxObj); err != nil {
			return err
		}
		result := eff
		if st.hasResult {
			result = deepCopy(st.result)
		}
		out, err := r.applyResult(st.resultPath, st.resultNull, input, result)
		if err != nil {
			return err
		}
		if out, err = applyOutputPath(st, out, ctxObj); err != nil {
			return err
		}
		r.exit(rec, def, events, st, out)
	case "Wait", "Succeed":
		rec.Cursor.DueTime = time.Time{}
		out, err := applyOutputPath(st, eff, ctxObj)
		if err != nil {
			return err
		}
		r.exit(rec, def, events, st, out)
	case "Choice":
		next := st.Default
		for _, c := range st.Choices {
			ok, err := c.match(eff, ctxObj)
			if err != nil {
				return err
			}
			if ok {
				next = c.Next
				break
			}
		}
		if next == "" {
			return runtimeErr(ErrNameNoChoiceMatched, "no Choice rule matched and there is no Default in state %s", st.Name)
		}
		out, err := applyOutputPath(st, eff, ctxObj)
		if err != nil {
			return err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		r.emit(rec, events, HistoryEvent{Type: "ChoiceStateExited", StateName: st.Name, Output: b})
		r.enter(rec, def, events, next, b)
	case "Fail":
		r.fail(rec, events, st.Error, st.Cause)
	}
	return nil
}

func (r *Runner) applyInputPath(st *State, input, ctxObj any) (any, error) {
	switch {
	case st.inputNull:
		return map[string]any{}, nil
	case st.inputPath == nil:
		return input, nil
	}
	v, err := st.inputPath.eval(input, ctxObj)
	if err != nil {
		return nil, runtimeErr(ErrNameRuntime, "invalid InputPath %s: %v", st.inputPath.src, errCause(err))
	}
	return v, nil
}

func (r *Runner) applyParameters(st *State, eff, ctxObj any) (any, error) {
	if st.parameters == nil {
		return eff, nil
	}
	return st.parameters.eval(eff, ctxObj)
}

func (r *Runner) applyResult(rp *refPath, null bool, rawInput, result any) (any, error) {
	switch {
	case null:
		return rawInput, nil
	case rp == nil:
		return result, nil
	}
	return rp.set(rawInput, result)
}

func applyOutputPath(st *State, out, ctxObj any) (any, error) {
	switch {
	case st.outputNull:
		return map[string]any{}, nil
	case st.outputPath == nil:
		return out, nil
	}
	v, err := st.outputPath.eval(out, ctxObj)
	if err != nil {
		return nil, runtimeErr(ErrNameRuntime, "invalid OutputPath %s: %v", st.outputPath.src, errCause(err))
	}
	return v, nil
}

func seed() [32]byte {
	var s [32]byte
	// crypto/rand never fails on supported platforms (Go 1.24+ panics instead).
	cryptoRead(s[:])
	return s
}
