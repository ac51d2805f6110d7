package asl_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/logs/logstest"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/statemachines"
)

const (
	machineName = "payment-recovery"
	functionArn = "arn:aws:lambda:us-east-1:123456789012:function:recovery-steps"
)

// t0 is a Sunday morning: the first payday after it is Tuesday 1 December.
var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// definition is the embedded recovery definition that template.yaml deploys.
func definition(testing.TB) []byte {
	return asl.Substitute(statemachines.PaymentRecovery, map[string]string{statemachines.RecoveryStepsFunctionArn: functionArn})
}

// harness is one "process": the bbolt file holds both the payments and the runner's
// checkpoints, as in the local stack; the provider and the dead-letter sink outlive it.
type harness struct {
	t      *testing.T
	clock  *clock.Fake
	sink   *recoverytest.DeadLetters
	store  *boltstore.Store
	runner *asl.Runner
	rec    *recovery.Recoverer
	logs   *logstest.Buffer
	// relay fires the parked recoveries' timers (the outbox), as the local stack's does.
	relay *outbox.Relay
}

func newHarness(t *testing.T, file string, clock *clock.Fake, prov provider.Provider, dl *recoverytest.DeadLetters, policy recovery.Policy) *harness {
	t.Helper()
	st, err := boltstore.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	checkpoints, err := asl.NewBoltStore(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	steps, err := recovery.NewSteps(recovery.Steps{Provider: prov, Store: st, DeadLetters: dl, Policy: policy,
		Now: clock.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	runner := asl.New(checkpoints, asl.TaskRegistry{"recovery-steps": steps.Handle}, asl.WithClock(clock),
		asl.WithRand(rand.New(rand.NewPCG(3, 4))), asl.WithLogger(log))
	if err := runner.Define(machineName, definition(t)); err != nil {
		t.Fatal(err)
	}
	starter := &asl.Starter{Runner: runner, StateMachine: machineName}
	resumer := &recovery.Steerer{Store: st, Starter: starter, Now: clock.Now}
	h := &harness{t: t, clock: clock, sink: dl, store: st, runner: runner, logs: logs,
		rec: &recovery.Recoverer{Starter: starter, Log: log},
		relay: &outbox.Relay{Store: st, Now: clock.Now, Log: log, Rand: rand.New(rand.NewPCG(5, 6)),
			Handlers: map[string]outbox.Handler{recovery.KindResume: resumer.ResumeFollowOn(), recovery.KindWake: resumer.WakeFollowOn()}}}
	t.Cleanup(h.close)
	return h
}

// close stops the process: the runner at its last checkpoint, then the file.
func (h *harness) close() {
	if h.runner == nil {
		return
	}
	h.runner.Close()
	h.store.Close()
	h.runner = nil
}

// declined records a declined payment as the payments API would, at the clock's time.
func (h *harness) declined(id, invoice, pm, code string) payments.Payment {
	h.t.Helper()
	now := h.clock.Now()
	p := payments.Payment{ID: id, Scope: "local", IdempotencyKey: "k_" + id, Status: provider.StatusDeclined,
		Amount: 1000, Currency: "usd", Customer: "cus_1", PaymentMethod: pm, Invoice: invoice,
		ProviderPaymentID: "pi_" + id, Decline: &provider.Decline{Code: code, ErrorCode: "card_declined", Network: "visa"},
		CreatedAt: now, UpdatedAt: now, Version: payments.VersionAt(now, provider.StatusDeclined)}
	return h.save(p)
}

// save writes the payment to the store as the payments API writes it.
func (h *harness) save(p payments.Payment) payments.Payment {
	h.t.Helper()
	w, err := p.Put()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.Put(context.Background(), w.Table, *w.Put, w.Cond); err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) arn(key string) string {
	return h.runner.ExecutionArn(machineName, recovery.ExecutionName(key, 1))
}

// timer is the earliest parked recovery's timer in the outbox; false when none is. It finds
// the timers through the running recoveries, each of which names its own.
func (h *harness) timer() (recovery.Resume, time.Time, bool) {
	h.t.Helper()
	ctx := context.Background()
	running, _, err := payments.ListRunningRecoveries(ctx, h.store, 100, "")
	if err != nil {
		h.t.Fatal(err)
	}
	var first recovery.Resume
	var due time.Time
	for _, rec := range running {
		if rec.Resume == "" {
			continue
		}
		it, err := h.store.Get(ctx, outbox.Table, rec.Resume, "")
		if errors.Is(err, store.ErrNotFound) {
			continue // delivered: its execution runs
		}
		if err != nil {
			h.t.Fatal(err)
		}
		m, err := outbox.Decode(it)
		if err != nil || m.Kind != recovery.KindResume {
			h.t.Fatalf("timer %s: %+v %v", rec.Resume, m, err)
		}
		var r recovery.Resume
		if err := json.Unmarshal(m.Payload, &r); err != nil || r.State.Plan == nil {
			h.t.Fatalf("timer %s: %v", m.Payload, err)
		}
		at := m.CreatedAt
		if m.DueAt.After(at) {
			at = m.DueAt
		}
		if due.IsZero() || at.Before(due) {
			first, due = r, at
		}
	}
	return first, due, !due.IsZero()
}

// pendingPlan is the plan the recovery is parked for.
func (h *harness) pendingPlan() recovery.Plan {
	h.t.Helper()
	r, _, ok := h.timer()
	if !ok {
		h.t.Fatal("no recovery parked")
	}
	return *r.State.Plan
}

// open counts the executions still running.
func (h *harness) open() int {
	h.t.Helper()
	exs, err := h.runner.ListExecutions(context.Background(), machineName)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, ex := range exs {
		if ex.Status == asl.StatusRunning {
			n++
		}
	}
	return n
}

// drain runs the relay once and returns how many messages it delivered. Only the recovery's
// kinds have handlers here: the payment changes it also commits stay in the outbox.
func (h *harness) drain() int {
	h.t.Helper()
	d, _, err := h.relay.Drain(context.Background())
	if err != nil {
		h.t.Fatalf("relay: %v", err)
	}
	return d
}

// fire moves the clock to the earliest timer's moment, lets the relay deliver it, and returns
// the ARN of the execution it resumed.
func (h *harness) fire() string {
	h.t.Helper()
	r, due, ok := h.timer()
	if !ok {
		h.t.Fatal("no timer to fire")
	}
	if d := due.Sub(h.clock.Now()); d > 0 {
		h.clock.Advance(d)
	}
	if n := h.drain(); n < 1 {
		h.t.Fatalf("the timer due %s was not delivered at %s", due, h.clock.Now())
	}
	return h.runner.ExecutionArn(machineName, r.Execution)
}

// recovery follows a recovery from its first execution to its end, firing each timer when
// the execution before it parked: it returns the last execution, the plans it parked for and
// the state transitions of all its executions.
func (h *harness) recovery(arn string) (last asl.Execution, plans []recovery.Plan, transitions int) {
	h.t.Helper()
	for range 100 {
		last = h.await(arn)
		transitions += last.StateTransitions
		if last.Status != asl.StatusSucceeded {
			return last, plans, transitions
		}
		if _, _, ok := h.timer(); !ok {
			return last, plans, transitions
		}
		plans = append(plans, h.pendingPlan())
		arn = h.fire()
	}
	h.t.Fatal("the recovery did not end within 100 executions")
	return last, plans, transitions
}

func (h *harness) await(arn string) asl.Execution {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := h.runner.AwaitExecution(ctx, arn)
	if err != nil {
		h.t.Fatal(err)
	}
	return ex
}

// autoAdvance fires every timer as soon as one is pending until stop is called.
func (h *harness) autoAdvance() (stop func()) {
	var done atomic.Bool
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			h.clock.BlockUntil(1)
			if done.Load() {
				return
			}
			h.clock.AdvanceToNext()
		}
	}()
	return func() {
		done.Store(true)
		for {
			tm := h.clock.NewTimer(time.Hour) // wakes the loop so it sees done
			select {
			case <-exited:
				tm.Stop()
				return
			case <-tm.C(): // the loop fired it before seeing done: wake it again
			}
		}
	}
}

func output(t *testing.T, ex asl.Execution) recovery.State {
	t.Helper()
	var st recovery.State
	if err := json.Unmarshal(ex.Output, &st); err != nil {
		t.Fatalf("output %s: %v", ex.Output, err)
	}
	return st
}

func storedPayment(t *testing.T, h *harness, id string) payments.Payment {
	t.Helper()
	p, err := payments.Get(context.Background(), h.store, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// transitions is the fixed cost of a recovery plus the cost of each charge attempt, over all
// its executions: Begin, Plan and Decide once, Park+Begin+Charge+Decide per attempt (an
// execution ends at each wait and a timer starts the next), and the end (Recovered; or
// DeadLetter and Stopped).
func transitions(attempts int, deadLettered bool) int {
	n := 3 + 4*attempts + 1
	if deadLettered {
		n++
	}
	return n
}

func TestSoftDeclineRecoveredAtThePlannedMoment(t *testing.T) {
	policy := recovery.DefaultPolicy()
	policy.Window = 30 * 24 * time.Hour // room for two payday retries
	clock := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clock.Now)
	prov.SetScript("pm_funds", recoverytest.Script{Code: "insufficient_funds", Declines: 1}) // attempt 2 declines, 3 succeeds
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &recoverytest.DeadLetters{}, policy)

	p := h.declined("pay_soft", "inv_soft", "pm_funds", "insufficient_funds")
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// A second start for the same decline (the payment_failed webhook) is already started.
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatalf("second start: %v", err)
	}
	arn := h.arn("inv_soft")
	var plans []recovery.Plan
	total := 0
	for attempt := 2; attempt <= 3; attempt++ {
		if ex := h.await(arn); ex.Status != asl.StatusSucceeded {
			t.Fatalf("attempt %d: execution %s %s (%s %s)", attempt, arn, ex.Status, ex.Error, ex.Cause)
		} else {
			total += ex.StateTransitions // ended at the wait
		}
		plan := h.pendingPlan()
		plans = append(plans, plan)
		if plan.Attempt != attempt || !plan.Retry {
			t.Fatalf("pending plan %+v, want a retry for attempt %d", plan, attempt)
		}
		if plan.Reason != recovery.ReasonFundedMoment {
			t.Errorf("attempt %d reason %s, want %s", attempt, plan.Reason, recovery.ReasonFundedMoment)
		}
		key := provider.AttemptKey("inv_soft", attempt)
		h.clock.Advance(plan.At.Sub(h.clock.Now()) - time.Second)
		if n := h.drain(); n != 0 {
			t.Fatalf("attempt %d: the relay delivered %d messages a second before the planned moment", attempt, n)
		}
		if calls, _, _ := prov.Snapshot(); calls[key] != 0 {
			t.Fatalf("attempt %d charged a second before its planned moment", attempt)
		}
		if n := h.open(); n != 0 {
			t.Fatalf("attempt %d: %d executions open during the wait, want none", attempt, n)
		}
		arn = h.fire()
	}
	ex := h.await(arn)
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, at, effects := prov.Snapshot()
	for _, plan := range plans {
		key := provider.AttemptKey("inv_soft", plan.Attempt)
		if calls[key] != 1 {
			t.Errorf("attempt %d reached the provider %d times, want 1", plan.Attempt, calls[key])
		}
		if !at[key].Equal(plan.At) {
			t.Errorf("attempt %d charged at %s, planned %s", plan.Attempt, at[key], plan.At)
		}
	}
	if plans[0].At.Before(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) || plans[1].At.Before(time.Date(2026, 12, 15, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("planned %s and %s, want the paydays 1 Dec and 15 Dec from 09:00", plans[0].At, plans[1].At)
	}
	if len(calls) != 2 || effects["pm_funds"] != 2 {
		t.Errorf("provider saw keys %v and %d charges, want 2 and 2", calls, effects["pm_funds"])
	}
	out := output(t, ex)
	if out.Result != recovery.ResultSucceeded || len(out.Charges) != 3 {
		t.Fatalf("output %s", ex.Output)
	}
	if got := []recovery.Result{out.Charges[0].Result, out.Charges[1].Result, out.Charges[2].Result}; got[0] != recovery.ResultDeclined || got[1] != recovery.ResultDeclined || got[2] != recovery.ResultSucceeded {
		t.Errorf("history outcomes %v", got)
	}
	stored := storedPayment(t, h, "pay_soft")
	if stored.Status != provider.StatusSucceeded || stored.Version <= p.Version || stored.Decline != nil {
		t.Errorf("stored payment %+v, want succeeded with a newer version than %d", stored, p.Version)
	}
	if len(h.sink.All()) != 0 {
		t.Errorf("dead letters %v", h.sink.All())
	}
	total += ex.StateTransitions
	if want := transitions(2, false); total != want {
		t.Errorf("transitions %d, want %d", total, want)
	}
	if n := strings.Count(h.logs.String(), `"msg":"recovery retry scheduled"`); n != 2 {
		t.Errorf("%d retry-scheduled log lines, want 2", n)
	}
	t.Logf("recovered on attempt 3 with %d transitions over 3 executions: %d per attempt", total, (total-transitions(0, false))/2)
}

func TestDeclinesThatEndInADeadLetter(t *testing.T) {
	tests := map[string]struct {
		code       string
		reason     recovery.Reason
		attempts   int // charge attempts expected (the retries of the policy)
		suggestion string
	}{
		"hard decline stops at once": {code: "lost_card", reason: recovery.ReasonNeedsCustomer, attempts: 0, suggestion: "another payment method"},
		"technical decline exhausts the schedule": {code: "processing_error", reason: recovery.ReasonExhausted,
			attempts: recovery.DefaultPolicy().MaxAttempts, suggestion: "automatic retries are used up"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			prov := recoverytest.NewProvider(clock.Now)
			prov.SetScript("pm", recoverytest.Script{Code: tc.code, Declines: -1})
			h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &recoverytest.DeadLetters{}, recovery.Policy{})
			p := h.declined("pay_1", "inv_1", "pm", tc.code)
			if err := h.rec.Declined(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			ex, plans, total := h.recovery(h.arn("inv_1"))
			if ex.Status != asl.StatusSucceeded {
				t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
			}
			calls, _, effects := prov.Snapshot()
			var planned []int
			for _, p := range plans {
				planned = append(planned, p.Attempt)
			}
			if len(planned) != tc.attempts || len(calls) != tc.attempts || effects["pm"] != tc.attempts {
				t.Fatalf("planned %v, provider keys %d, charges %d; want %d each", planned, len(calls), effects["pm"], tc.attempts)
			}
			for i, n := range planned {
				if n != i+2 {
					t.Errorf("planned attempt %d numbered %d", i, n)
				}
				if c := calls[provider.AttemptKey("inv_1", n)]; c != 1 {
					t.Errorf("attempt %d reached the provider %d times, want 1", n, c)
				}
			}
			dls := h.sink.All()
			d, ok := dls[recovery.DeadLetterKey(recovery.State{PaymentID: "pay_1", Round: 1})]
			if len(dls) != 1 || !ok {
				t.Fatalf("dead letters %v", dls)
			}
			if d.Source != "recovery" || d.Reason != string(tc.reason) || d.PaymentID != "pay_1" || d.Invoice != "inv_1" ||
				len(d.Charges) != tc.attempts+1 || !strings.HasPrefix(d.Explanation, "Not retrying because") ||
				!strings.Contains(d.SuggestedAction, tc.suggestion) || !json.Valid(d.Payload) {
				t.Errorf("dead letter %+v", d)
			}
			if want := transitions(tc.attempts, true); total != want {
				t.Errorf("transitions %d, want %d", total, want)
			}
			if stored := storedPayment(t, h, "pay_1"); stored.Status != provider.StatusDeclined {
				t.Errorf("stored status %s", stored.Status)
			}
			if n := strings.Count(h.logs.String(), `"msg":"recovery dead-lettered"`); n != 1 {
				t.Errorf("%d dead-lettered log lines, want 1", n)
			}
		})
	}
}

// TestKillWhileParkedResumesAfterRestart: a process killed while a recovery waits leaves no
// execution running (the execution ended at the wait) and the timer in the store; after the
// restart the relay fires it at the planned moment and the charge happens once.
func TestKillWhileParkedResumesAfterRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "twice.db")
	dl := &recoverytest.DeadLetters{}
	clk := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm", recoverytest.Script{Code: "insufficient_funds", Declines: 0})
	h := newHarness(t, file, clk, prov, dl, recovery.Policy{})
	p := h.declined("pay_w", "", "pm", "insufficient_funds") // no invoice: keyed by payment id
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	first := h.await(h.arn("pay_w"))
	plan := h.pendingPlan()
	h.close() // killed during the wait

	later := clock.NewFake(t0.Add(10 * time.Minute))
	prov.SetNow(later.Now)
	h = newHarness(t, file, later, prov, dl, recovery.Policy{})
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 0 {
		t.Fatalf("Resume = %d, %v; want no execution left open by the wait", n, err)
	}
	if n := h.drain(); n != 0 {
		t.Fatalf("the relay delivered %d messages before the planned moment", n)
	}
	ex, _, total := h.recovery(h.fire())
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, at, effects := prov.Snapshot()
	key := provider.AttemptKey("pay_w", 2)
	if len(calls) != 1 || calls[key] != 1 || effects["pm"] != 1 || !at[key].Equal(plan.At) {
		t.Errorf("provider calls %v charges %v at %v; want one charge with key %s at %s", calls, effects, at, key, plan.At)
	}
	if want := transitions(1, false); first.StateTransitions+total != want {
		t.Errorf("transitions %d, want %d", first.StateTransitions+total, want)
	}
}

func TestCrashDuringChargeRepeatsOnlyTheKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "twice.db")
	dl := &recoverytest.DeadLetters{}
	clk := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clk.Now)
	prov.SetScript("pm", recoverytest.Script{Code: "processing_error", Declines: 1}) // attempt 2 declines, 3 succeeds
	key3 := provider.AttemptKey("inv_c", 3)
	prov.HangAfterCharge(key3)
	h := newHarness(t, file, clk, prov, dl, recovery.Policy{})
	p := h.declined("pay_c", "inv_c", "pm", "processing_error")
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h.await(h.arn("inv_c"))
	h.await(h.fire()) // attempt 2 declines and parks again
	arn := h.fire()   // attempt 3
	select {
	case got := <-prov.Hung():
		if got != key3 {
			t.Fatalf("hung on %s", got)
		}
	case <-time.After(30 * time.Second): // a guard, not a wait: the fake clock drives the test
		t.Fatalf("attempt 3 never reached the provider with key %s", key3)
	}
	stoppedAt := clk.Now()
	h.close() // killed after the provider charged, before the answer was checkpointed

	again := clock.NewFake(stoppedAt)
	prov.SetNow(again.Now)
	h = newHarness(t, file, again, prov, dl, recovery.Policy{})
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	ex := h.await(arn)
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, _, effects := prov.Snapshot()
	key2 := provider.AttemptKey("inv_c", 2)
	if calls[key2] != 1 || calls[key3] != 2 || len(calls) != 2 {
		t.Errorf("requests per key %v: want attempt 2 once and attempt 3 twice (the repeat after the crash)", calls)
	}
	if effects["pm"] != len(calls) {
		t.Errorf("%d effective charges for %d distinct keys: an attempt ran twice", effects["pm"], len(calls))
	}
	if out := output(t, ex); len(out.Charges) != 3 || out.Result != recovery.ResultSucceeded {
		t.Errorf("output %s", ex.Output)
	}
	if stored := storedPayment(t, h, "pay_c"); stored.Status != provider.StatusSucceeded {
		t.Errorf("stored status %s", stored.Status)
	}
	if ex.StateTransitions != 4 {
		t.Errorf("transitions %d, want 4: Begin, Charge, Decide, Recovered (the interrupted Charge is not entered again)", ex.StateTransitions)
	}
}

// TestAlreadyPaidEndsWithoutACharge: a payment settled before the first plan (the customer
// paid through a link) ends the recovery at once.
func TestAlreadyPaidEndsWithoutACharge(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clock.Now)
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &recoverytest.DeadLetters{}, recovery.Policy{})
	p := h.declined("pay_paid", "inv_paid", "pm", "insufficient_funds")
	paid := p
	paid.Status, paid.Version = provider.StatusSucceeded, payments.VersionAt(t0.Add(time.Minute), provider.StatusSucceeded)
	h.save(paid)
	if err := h.rec.Start(context.Background(), p, 1); err != nil {
		t.Fatal(err)
	}
	ex := h.await(h.arn("inv_paid"))
	if ex.Status != asl.StatusSucceeded || output(t, ex).Result != recovery.ResultSettled {
		t.Fatalf("status %s output %s (%s %s)", ex.Status, ex.Output, ex.Error, ex.Cause)
	}
	if calls, _, _ := prov.Snapshot(); len(calls) != 0 {
		t.Errorf("provider called %v", calls)
	}
	if ex.StateTransitions != 4 {
		t.Errorf("transitions %d, want 4 (Begin, Plan, Decide, Recovered)", ex.StateTransitions)
	}
}

func TestStepFailures(t *testing.T) {
	tests := map[string]struct {
		errs        []error
		wantStatus  asl.Status
		wantCharges int
		wantDLs     int
		wantTrans   int
	}{
		"transient errors are retried with the same key": {
			errs:       []error{&provider.UnknownOutcomeError{Op: "confirm", Err: errors.New("reset")}, &provider.ThrottledError{Op: "confirm", Err: errors.New("429")}},
			wantStatus: asl.StatusSucceeded, wantCharges: 1, wantTrans: transitions(1, false) + 2,
		},
		"a rejected charge dead-letters and fails the execution": {
			errs:       []error{&provider.CredentialsError{Op: "confirm", StatusCode: 401, Err: errors.New("401")}},
			wantStatus: asl.StatusFailed, wantDLs: 1, wantTrans: 4 + 4, // Begin, Plan, Decide, Park; Begin, Charge, DeadLetterOnError, Failed
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			prov := recoverytest.NewProvider(clock.Now)
			prov.SetScript("pm", recoverytest.Script{Declines: 0})
			fp := &recoverytest.FailingProvider{Provider: prov, Errs: tc.errs}
			dl := &recoverytest.DeadLetters{}
			h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, fp, dl, recovery.Policy{})
			p := h.declined("pay_f", "inv_f", "pm", "processing_error")
			if err := h.rec.Declined(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			stop := h.autoAdvance() // the Task retries' backoff
			ex, _, total := h.recovery(h.arn("inv_f"))
			stop()
			if ex.Status != tc.wantStatus {
				t.Fatalf("status %s (%s %s), want %s", ex.Status, ex.Error, ex.Cause, tc.wantStatus)
			}
			_, _, effects := prov.Snapshot()
			if effects["pm"] != tc.wantCharges {
				t.Errorf("%d charges, want %d", effects["pm"], tc.wantCharges)
			}
			dls := h.sink.All()
			if len(dls) != tc.wantDLs {
				t.Fatalf("dead letters %v", dls)
			}
			for _, d := range dls {
				if d.Reason != "step_failed" || !strings.Contains(d.Explanation, recovery.ErrNameRejected) {
					t.Errorf("dead letter %+v", d)
				}
			}
			if tc.wantStatus == asl.StatusFailed && ex.Error != "Recovery.Failed" {
				t.Errorf("execution error %q", ex.Error)
			}
			if total != tc.wantTrans {
				t.Errorf("transitions %d, want %d", total, tc.wantTrans)
			}
		})
	}
}
