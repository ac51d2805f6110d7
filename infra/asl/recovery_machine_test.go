package asl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
)

const (
	machineName = "payment-recovery"
	functionArn = "arn:aws:lambda:us-east-1:123456789012:function:recovery-steps"
)

// t0 is a Sunday morning: the first payday after it is Tuesday 1 December.
var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func definition(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	return asl.Substitute(raw, map[string]string{"RecoveryStepsFunctionArn": functionArn})
}

// script says how a payment method behaves: it declines with code the first declines
// effective charges (forever when declines < 0), then succeeds.
type script struct {
	code     string
	declines int
	brand    string // visa when empty
	card     string // the card's fingerprint; "fp_" + the payment method when empty
}

type outcome struct {
	p   provider.Payment
	err error
}

// scriptedProvider confirms payments by script and, like Stripe, answers a repeated
// idempotency key with the outcome it stored for the first request: a repeat is never a
// second charge. It counts requests per key and effective charges per payment method.
type scriptedProvider struct {
	now func() time.Time

	mu      sync.Mutex
	scripts map[string]script
	stored  map[string]outcome
	calls   map[string]int       // requests per idempotency key
	at      map[string]time.Time // time of the effective charge per key
	effects map[string]int       // effective charges per payment method
	hang    map[string]bool      // keys whose first request hangs after its effect, until cancelled
	hung    chan string
	// cardReads counts PaymentMethodCard calls.
	cardReads int
}

var _ provider.Provider = (*scriptedProvider)(nil)

func newScriptedProvider(now func() time.Time) *scriptedProvider {
	return &scriptedProvider{now: now, scripts: map[string]script{}, stored: map[string]outcome{},
		calls: map[string]int{}, at: map[string]time.Time{}, effects: map[string]int{}, hang: map[string]bool{},
		hung: make(chan string, 1)}
}

func (s *scriptedProvider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	s.mu.Lock()
	s.calls[req.IdempotencyKey]++
	if o, ok := s.stored[req.IdempotencyKey]; ok {
		s.mu.Unlock()
		return o.p, o.err
	}
	if req.IdempotencyKey == "" || !req.OffSession {
		s.mu.Unlock()
		return provider.Payment{}, &provider.PermanentError{Op: "confirm", StatusCode: 400, Code: "parameter_missing", Err: errors.New("recovery charges are keyed and off-session")}
	}
	sc := s.scripts[req.PaymentMethod]
	n := s.effects[req.PaymentMethod]
	s.effects[req.PaymentMethod]++
	s.at[req.IdempotencyKey] = s.now()
	p := provider.Payment{ID: req.ID, Status: provider.StatusSucceeded, PaymentMethod: req.PaymentMethod, Amount: 1000, Currency: "usd"}
	o := outcome{p: p}
	if sc.declines < 0 || n < sc.declines {
		p.Status = provider.StatusDeclined
		brand, fp := sc.brand, sc.card
		if brand == "" {
			brand = "visa"
		}
		if fp == "" {
			fp = "fp_" + req.PaymentMethod
		}
		p.Decline = &provider.Decline{Code: sc.code, ErrorCode: "card_declined", Network: brand}
		p.Card = &provider.Card{Fingerprint: fp, Brand: brand, Last4: "4242"}
		o = outcome{p: p, err: &provider.DeclineError{Payment: p}}
	}
	s.stored[req.IdempotencyKey] = o
	hang := s.hang[req.IdempotencyKey]
	delete(s.hang, req.IdempotencyKey)
	s.mu.Unlock()
	if hang {
		// The charge happened; the answer is lost because the process dies.
		s.hung <- req.IdempotencyKey
		<-ctx.Done()
		return provider.Payment{}, &provider.UnknownOutcomeError{Op: "confirm", IdempotencyKey: req.IdempotencyKey, Err: ctx.Err()}
	}
	return o.p, o.err
}

func (s *scriptedProvider) Create(context.Context, provider.CreateRequest) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never creates")
}

func (s *scriptedProvider) Get(context.Context, string) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never reads")
}

// PaymentMethodCard names the card a payment method's declines name.
func (s *scriptedProvider) PaymentMethodCard(_ context.Context, pm string) (provider.Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cardReads++
	sc := s.scripts[pm]
	brand, fp := sc.brand, sc.card
	if brand == "" {
		brand = "visa"
	}
	if fp == "" {
		fp = "fp_" + pm
	}
	return provider.Card{Fingerprint: fp, Brand: brand, Last4: "4242"}, nil
}

func (s *scriptedProvider) List(context.Context, provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) { yield(provider.Payment{}, errors.New("not listed")) }
}

func (s *scriptedProvider) snapshot() (calls map[string]int, at map[string]time.Time, effects map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls, at, effects = map[string]int{}, map[string]time.Time{}, map[string]int{}
	for k, v := range s.calls {
		calls[k] = v
	}
	for k, v := range s.at {
		at[k] = v
	}
	for k, v := range s.effects {
		effects[k] = v
	}
	return calls, at, effects
}

// sink is the dead-letter sink: one record per key, like the real table's conditional put.
type sink struct {
	mu      sync.Mutex
	records map[string]recovery.DeadLetter
	opens   int
}

func (s *sink) Open(_ context.Context, d recovery.DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens++
	if _, ok := s.records[d.Key]; !ok {
		s.records[d.Key] = d
	}
	return nil
}

func (s *sink) all() map[string]recovery.DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]recovery.DeadLetter{}
	for k, v := range s.records {
		out[k] = v
	}
	return out
}

// harness is one "process": the bbolt file holds both the payments and the runner's
// checkpoints, as in the local stack; the provider and the dead-letter sink outlive it.
type harness struct {
	t      *testing.T
	clock  *clock.Fake
	sink   *sink
	store  *boltstore.Store
	runner *asl.Runner
	rec    *recovery.Recoverer
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newHarness(t *testing.T, file string, clock *clock.Fake, prov provider.Provider, dl *sink, policy recovery.Policy) *harness {
	t.Helper()
	st, err := boltstore.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	checkpoints, err := asl.NewBoltStore(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
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
	h := &harness{t: t, clock: clock, sink: dl, store: st, runner: runner, logs: logs,
		rec: &recovery.Recoverer{Starter: &asl.Starter{Runner: runner, StateMachine: machineName}, Log: log}}
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

// pendingPlan is the plan of the Wait the execution is in.
func (h *harness) pendingPlan(arn string) recovery.Plan {
	h.t.Helper()
	evs, err := h.runner.GetExecutionHistory(context.Background(), arn)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == "TaskStateEntered" && evs[i].StateName == "WaitForPlannedMoment" {
			var st recovery.State
			if err := json.Unmarshal(evs[i].Input, &st); err != nil || st.Plan == nil {
				h.t.Fatalf("wait input %s: %v", evs[i].Input, err)
			}
			return *st.Plan
		}
	}
	h.t.Fatal("no Wait entered")
	return recovery.Plan{}
}

// plannedAttempts lists the attempt numbers of every Wait the execution entered.
func (h *harness) plannedAttempts(arn string) []int {
	h.t.Helper()
	evs, err := h.runner.GetExecutionHistory(context.Background(), arn)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []int
	for _, e := range evs {
		if e.Type == "TaskStateEntered" && e.StateName == "WaitForPlannedMoment" {
			var st recovery.State
			if err := json.Unmarshal(e.Input, &st); err != nil || st.Plan == nil {
				h.t.Fatalf("wait input %s: %v", e.Input, err)
			}
			out = append(out, st.Plan.Attempt)
		}
	}
	return out
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

// transitions is the fixed cost of a recovery plus the cost of each charge attempt: Plan and
// Decide once, Wait+Charge+Decide per attempt, and the end (Recovered; or DeadLetter and
// Stopped).
func transitions(attempts int, deadLettered bool) int {
	n := 2 + 3*attempts + 1
	if deadLettered {
		n++
	}
	return n
}

func TestSoftDeclineRecoveredAtThePlannedMoment(t *testing.T) {
	policy := recovery.DefaultPolicy()
	policy.Window = 30 * 24 * time.Hour // room for two payday retries
	clock := clock.NewFake(t0)
	prov := newScriptedProvider(clock.Now)
	prov.scripts["pm_funds"] = script{code: "insufficient_funds", declines: 1} // attempt 2 declines, 3 succeeds
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &sink{records: map[string]recovery.DeadLetter{}}, policy)

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
	for attempt := 2; attempt <= 3; attempt++ {
		h.clock.BlockUntil(1)
		plan := h.pendingPlan(arn)
		plans = append(plans, plan)
		if plan.Attempt != attempt || !plan.Retry {
			t.Fatalf("pending plan %+v, want a retry for attempt %d", plan, attempt)
		}
		if plan.Reason != recovery.ReasonFundedMoment {
			t.Errorf("attempt %d reason %s, want %s", attempt, plan.Reason, recovery.ReasonFundedMoment)
		}
		key := provider.AttemptKey("inv_soft", attempt)
		h.clock.Advance(plan.At.Sub(h.clock.Now()) - time.Second)
		if calls, _, _ := prov.snapshot(); calls[key] != 0 {
			t.Fatalf("attempt %d charged a second before its planned moment", attempt)
		}
		if h.clock.Waiters() != 1 {
			t.Fatalf("attempt %d: %d timers pending a second early, want the Wait's", attempt, h.clock.Waiters())
		}
		h.clock.Advance(time.Second)
	}
	ex := h.await(arn)
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, at, effects := prov.snapshot()
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
	if len(h.sink.all()) != 0 {
		t.Errorf("dead letters %v", h.sink.all())
	}
	if want := transitions(2, false); ex.StateTransitions != want {
		t.Errorf("transitions %d, want %d", ex.StateTransitions, want)
	}
	if n := strings.Count(h.logs.String(), `"msg":"recovery retry scheduled"`); n != 2 {
		t.Errorf("%d retry-scheduled log lines, want 2", n)
	}
	t.Logf("recovered on attempt 3 with %d transitions: %d per attempt", ex.StateTransitions, (ex.StateTransitions-transitions(0, false))/2)
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
			prov := newScriptedProvider(clock.Now)
			prov.scripts["pm"] = script{code: tc.code, declines: -1}
			h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &sink{records: map[string]recovery.DeadLetter{}}, recovery.Policy{})
			p := h.declined("pay_1", "inv_1", "pm", tc.code)
			if err := h.rec.Declined(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			stop := h.autoAdvance()
			ex := h.await(h.arn("inv_1"))
			stop()
			if ex.Status != asl.StatusSucceeded {
				t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
			}
			calls, _, effects := prov.snapshot()
			planned := h.plannedAttempts(h.arn("inv_1"))
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
			dls := h.sink.all()
			d, ok := dls[recovery.DeadLetterKey(recovery.State{PaymentID: "pay_1", Round: 1})]
			if len(dls) != 1 || !ok {
				t.Fatalf("dead letters %v", dls)
			}
			if d.Source != "recovery" || d.Reason != string(tc.reason) || d.PaymentID != "pay_1" || d.Invoice != "inv_1" ||
				len(d.Charges) != tc.attempts+1 || !strings.HasPrefix(d.Explanation, "Not retrying because") ||
				!strings.Contains(d.SuggestedAction, tc.suggestion) || !json.Valid(d.Payload) {
				t.Errorf("dead letter %+v", d)
			}
			if want := transitions(tc.attempts, true); ex.StateTransitions != want {
				t.Errorf("transitions %d, want %d", ex.StateTransitions, want)
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

func TestCrashDuringWaitResumesWithoutRepeating(t *testing.T) {
	file := filepath.Join(t.TempDir(), "twice.db")
	dl := &sink{records: map[string]recovery.DeadLetter{}}
	clk := clock.NewFake(t0)
	prov := newScriptedProvider(clk.Now)
	prov.scripts["pm"] = script{code: "insufficient_funds", declines: 0}
	h := newHarness(t, file, clk, prov, dl, recovery.Policy{})
	p := h.declined("pay_w", "", "pm", "insufficient_funds") // no invoice: keyed by payment id
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	arn := h.arn("pay_w")
	clk.BlockUntil(1)
	plan := h.pendingPlan(arn)
	h.close() // killed during the Wait

	later := clock.NewFake(t0.Add(10 * time.Minute))
	prov.now = later.Now
	h = newHarness(t, file, later, prov, dl, recovery.Policy{})
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	later.BlockUntil(1)
	left := plan.At.Sub(later.Now())
	if d, _ := later.AdvanceToNext(); d != left {
		t.Fatalf("the Wait resumed with %s left, want %s (until %s)", d, left, plan.At)
	}
	ex := h.await(arn)
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, at, effects := prov.snapshot()
	key := provider.AttemptKey("pay_w", 2)
	if len(calls) != 1 || calls[key] != 1 || effects["pm"] != 1 || !at[key].Equal(plan.At) {
		t.Errorf("provider calls %v charges %v at %v; want one charge with key %s at %s", calls, effects, at, key, plan.At)
	}
	if want := transitions(1, false); ex.StateTransitions != want {
		t.Errorf("transitions %d, want %d", ex.StateTransitions, want)
	}
}

func TestCrashDuringChargeRepeatsOnlyTheKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "twice.db")
	dl := &sink{records: map[string]recovery.DeadLetter{}}
	clk := clock.NewFake(t0)
	prov := newScriptedProvider(clk.Now)
	prov.scripts["pm"] = script{code: "processing_error", declines: 1} // attempt 2 declines, 3 succeeds
	key3 := provider.AttemptKey("inv_c", 3)
	prov.hang[key3] = true
	h := newHarness(t, file, clk, prov, dl, recovery.Policy{})
	p := h.declined("pay_c", "inv_c", "pm", "processing_error")
	if err := h.rec.Declined(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	arn := h.arn("inv_c")
	for range 2 {
		clk.BlockUntil(1)
		clk.AdvanceToNext()
	}
	select {
	case got := <-prov.hung:
		if got != key3 {
			t.Fatalf("hung on %s", got)
		}
	case <-time.After(30 * time.Second): // a guard, not a wait: the fake clock drives the test
		t.Fatalf("attempt 3 never reached the provider with key %s", key3)
	}
	stoppedAt := clk.Now()
	h.close() // killed after the provider charged, before the answer was checkpointed

	again := clock.NewFake(stoppedAt)
	prov.now = again.Now
	h = newHarness(t, file, again, prov, dl, recovery.Policy{})
	if n, err := h.runner.Resume(context.Background()); err != nil || n != 1 {
		t.Fatalf("Resume = %d, %v", n, err)
	}
	ex := h.await(arn)
	if ex.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", ex.Status, ex.Error, ex.Cause)
	}
	calls, _, effects := prov.snapshot()
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
	if want := transitions(2, false); ex.StateTransitions != want {
		t.Errorf("transitions %d, want %d (the interrupted Charge is not entered again)", ex.StateTransitions, want)
	}
}

// TestAlreadyPaidEndsWithoutACharge: a payment settled before the first plan (the customer
// paid through a link) ends the recovery at once.
func TestAlreadyPaidEndsWithoutACharge(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := newScriptedProvider(clock.Now)
	h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, prov, &sink{records: map[string]recovery.DeadLetter{}}, recovery.Policy{})
	p := h.declined("pay_paid", "inv_paid", "pm", "insufficient_funds")
	paid := p
	paid.Status, paid.Version = provider.StatusSucceeded, payments.VersionAt(t0.Add(time.Minute), provider.StatusSucceeded)
	w, err := paid.Put()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Put(context.Background(), w.Table, *w.Put, w.Cond); err != nil {
		t.Fatal(err)
	}
	if err := h.rec.Start(context.Background(), p, 1); err != nil {
		t.Fatal(err)
	}
	ex := h.await(h.arn("inv_paid"))
	if ex.Status != asl.StatusSucceeded || output(t, ex).Result != recovery.ResultSettled {
		t.Fatalf("status %s output %s (%s %s)", ex.Status, ex.Output, ex.Error, ex.Cause)
	}
	if calls, _, _ := prov.snapshot(); len(calls) != 0 {
		t.Errorf("provider called %v", calls)
	}
	if ex.StateTransitions != 3 {
		t.Errorf("transitions %d, want 3 (Plan, Decide, Recovered)", ex.StateTransitions)
	}
}

// failingProvider fails the first len(errs) confirms with errs in order, then confirms
// through the scripted provider.
type failingProvider struct {
	*scriptedProvider
	mu   sync.Mutex
	errs []error
	seen int
}

func (f *failingProvider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	f.mu.Lock()
	f.seen++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		return provider.Payment{}, err
	}
	f.mu.Unlock()
	return f.scriptedProvider.Confirm(ctx, req)
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
			wantStatus: asl.StatusFailed, wantDLs: 1, wantTrans: 2 + 2 + 2, // Plan, Decide, Wait, Charge, DeadLetterOnError, Failed
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			prov := newScriptedProvider(clock.Now)
			prov.scripts["pm"] = script{declines: 0}
			fp := &failingProvider{scriptedProvider: prov, errs: tc.errs}
			dl := &sink{records: map[string]recovery.DeadLetter{}}
			h := newHarness(t, filepath.Join(t.TempDir(), "twice.db"), clock, fp, dl, recovery.Policy{})
			p := h.declined("pay_f", "inv_f", "pm", "processing_error")
			if err := h.rec.Declined(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			stop := h.autoAdvance()
			ex := h.await(h.arn("inv_f"))
			stop()
			if ex.Status != tc.wantStatus {
				t.Fatalf("status %s (%s %s), want %s", ex.Status, ex.Error, ex.Cause, tc.wantStatus)
			}
			_, _, effects := prov.snapshot()
			if effects["pm"] != tc.wantCharges {
				t.Errorf("%d charges, want %d", effects["pm"], tc.wantCharges)
			}
			dls := h.sink.all()
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
			if ex.StateTransitions != tc.wantTrans {
				t.Errorf("transitions %d, want %d", ex.StateTransitions, tc.wantTrans)
			}
		})
	}
}
