package recovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// steerStores are the stores the relayed steering runs on: the local one and DynamoDB Local.
var steerStores = testenv.Stores(payments.Table, outbox.Table)

// starts records the executions the relay starts; a name already started counts as started
// (ExecutionAlreadyExists is success) and is not started again.
type starts struct {
	mu     sync.Mutex
	inputs map[string]recovery.ResumeInput // name -> the first start's input
	calls  int
}

func (s *starts) Start(_ context.Context, name string, input []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if _, ok := s.inputs[name]; ok {
		return nil
	}
	var in recovery.ResumeInput
	if err := json.Unmarshal(input, &in); err != nil {
		return err
	}
	s.inputs[name] = in
	return nil
}

func (s *starts) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.inputs) }

func (s *starts) get(name string) (recovery.ResumeInput, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inputs[name]
	return in, ok
}

// steerEnv is operator-api's Steerer (with no Starter), the relay's (with one), the
// recovery steps and the relay, on one store with a declined payment in recovery.
type steerEnv struct {
	store  store.Store
	clock  *clock.Fake
	ops    *recovery.Steerer
	starts *starts
	relay  *outbox.Relay
	steps  *recovery.Steps
}

func newSteerEnv(t *testing.T, newStore func(t *testing.T) store.Store) steerEnv {
	t.Helper()
	st := newStore(t)
	clk := clock.NewFake(t0)
	started := &starts{inputs: map[string]recovery.ResumeInput{}}
	relayed := &recovery.Steerer{Store: st, Starter: started, Now: clk.Now}
	steps, err := recovery.NewSteps(recovery.Steps{Provider: &providertest.Fake{Now: clk.Now}, Store: st,
		DeadLetters: &recoverytest.DeadLetters{}, Now: clk.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	p := payments.Payment{ID: "pay_w", Status: provider.StatusDeclined, Customer: "cus_w", Invoice: "inv_w", PaymentMethod: "pm_w",
		ProviderPaymentID: "pi_w", Amount: 1000, Currency: "usd", Decline: &provider.Decline{Code: "processing_error", ErrorCode: "processing_error"},
		CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)}
	w, err := p.Put()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), w.Table, *w.Put, w.Cond); err != nil {
		t.Fatal(err)
	}
	return steerEnv{store: st, clock: clk, starts: started, steps: steps,
		ops: &recovery.Steerer{Store: st, Now: clk.Now},
		relay: &outbox.Relay{Store: st, Now: clk.Now, Log: discard(), Rand: rand.New(rand.NewPCG(3, 4)),
			Handlers: map[string]outbox.Handler{recovery.KindWake: relayed.WakeFollowOn(), recovery.KindResume: relayed.ResumeFollowOn()}}}
}

// drain runs the relay until nothing due is left (a wake brings a timer forward, which the
// next pass delivers) and returns how many messages it delivered.
func (e steerEnv) drain(t *testing.T) int {
	t.Helper()
	n := 0
	for range 5 {
		d, f, err := e.relay.Drain(context.Background())
		if f != 0 || err != nil {
			t.Fatalf("drain: %d failed (%v)", f, err)
		}
		if d == 0 {
			return n
		}
		n += d
	}
	t.Fatal("the relay kept finding due messages")
	return n
}

// planned runs the plan step of the payment's first round, which plans a retry.
func (e steerEnv) planned(t *testing.T) recovery.State {
	t.Helper()
	st, err := e.step(t, recovery.StepPlan, recovery.State{PaymentID: "pay_w", Invoice: "inv_w", Round: 1})
	if err != nil || st.Plan == nil || !st.Plan.Retry {
		t.Fatalf("plan: %+v %v", st.Plan, err)
	}
	return st
}

// parked plans the first round and parks its wait.
func (e steerEnv) parked(t *testing.T) recovery.State {
	t.Helper()
	st := e.planned(t)
	if _, err := e.step(t, recovery.StepPark, st); err != nil {
		t.Fatalf("park: %v", err)
	}
	return st
}

// step runs one step of the state machine at the clock's time.
func (e steerEnv) step(t *testing.T, name string, st recovery.State) (recovery.State, error) {
	t.Helper()
	in, _ := json.Marshal(recovery.StepInput{Step: name, State: st, Now: e.clock.Now()})
	out, err := e.steps.Handle(context.Background(), in)
	if err != nil {
		return st, err
	}
	if name == recovery.StepPark {
		return st, nil
	}
	var next recovery.State
	if err := json.Unmarshal(out, &next); err != nil {
		t.Fatal(err)
	}
	return next, nil
}

func (e steerEnv) pending(t *testing.T) *recovery.Steer {
	t.Helper()
	sg, err := recovery.GetSteer(context.Background(), e.store, "pay_w")
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// timer reads the parked recovery's timer from the outbox.
func (e steerEnv) timer(t *testing.T, st recovery.State) (outbox.Message, bool) {
	t.Helper()
	it, err := e.store.Get(context.Background(), outbox.Table, "resume#"+recovery.ResumeName(st), "")
	if errors.Is(err, store.ErrNotFound) {
		return outbox.Message{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := outbox.Decode(it)
	if err != nil || m.Kind != recovery.KindResume {
		t.Fatalf("timer %+v (%v)", m, err)
	}
	return m, true
}

// The park step ends the execution at the wait with a timer due at the planned moment: the
// relay starts nothing before it, and at the moment starts the execution that resumes the
// recovery to Charge, once (a second delivery finds it started).
func TestTimerResumesAtThePlannedMoment(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			st := e.parked(t)
			m, ok := e.timer(t, st)
			if !ok || !m.DueAt.Equal(st.Plan.At) {
				t.Fatalf("timer %+v, want one due at the planned moment %s", m, st.Plan.At)
			}
			rec, err := payments.GetRecovery(ctx, e.store, "pay_w")
			if err != nil || rec.State != payments.RecoveryScheduled || rec.Resume != m.ID || !rec.NextAttemptAt.Equal(st.Plan.At) {
				t.Fatalf("parked recovery %+v (%v)", rec, err)
			}
			e.clock.Advance(st.Plan.At.Sub(e.clock.Now()) - time.Second)
			if n := e.drain(t); n != 0 || e.starts.count() != 0 {
				t.Fatalf("a second early: %d delivered, %d started", n, e.starts.count())
			}
			e.clock.Advance(time.Second)
			if n := e.drain(t); n != 1 {
				t.Fatalf("at the moment: %d delivered", n)
			}
			in, ok := e.starts.get(recovery.ResumeName(st))
			if !ok || in.Resume != recovery.ResumeCharge || in.PaymentID != "pay_w" || in.Plan == nil || !in.Plan.At.Equal(st.Plan.At) {
				t.Fatalf("started %+v", e.starts.inputs)
			}
			if err := e.relay.Deliver(ctx, m, 0); err != nil || e.starts.count() != 1 {
				t.Fatalf("second delivery: %v, %d started", err, e.starts.count())
			}
		})
	}
}

// An operator's charge-now on a parked recovery commits the signal and its wake in one
// transaction and starts nothing itself; the relay's delivery of the wake brings the timer
// forward, and the timer starts the resumed execution to Steer, once: the planned moment
// later finds no timer left, and a second wake finds the recovery resumed.
func TestRelayedSteerCommitsTheSignalWithItsWake(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			st := e.parked(t)
			if _, err := e.ops.Steer(ctx, recovery.Steer{PaymentID: "pay_w", Action: recovery.ActionChargeNow,
				Reason: recovery.ReasonOperator, Actor: "jwt:ops"}); err != nil {
				t.Fatal(err)
			}
			sg := e.pending(t)
			if sg == nil || sg.Action != recovery.ActionChargeNow || e.starts.count() != 0 {
				t.Fatalf("after the steer: signal %+v, %d started", sg, e.starts.count())
			}
			it, err := e.store.Get(ctx, outbox.Table, recovery.WakeID(*sg), "")
			if err != nil {
				t.Fatalf("the wake %s is not in the outbox: %v", recovery.WakeID(*sg), err)
			}
			wake, err := outbox.Decode(it)
			if err != nil || wake.Kind != recovery.KindWake {
				t.Fatalf("wake %+v (%v)", wake, err)
			}
			if n := e.drain(t); n != 2 {
				t.Fatalf("drain: %d delivered, want the wake and the timer it brought forward", n)
			}
			in, ok := e.starts.get(recovery.ResumeName(st))
			if !ok || in.Resume != recovery.ResumeSteer || e.starts.count() != 1 {
				t.Fatalf("started %+v, want the parked execution resumed to Steer", e.starts.inputs)
			}
			if _, ok := e.timer(t, st); ok {
				t.Fatal("the timer is still in the outbox after it fired")
			}
			if err := e.relay.Deliver(ctx, wake, 0); err != nil || e.starts.count() != 1 {
				t.Fatalf("second wake: %v, %d started", err, e.starts.count())
			}
			e.clock.Advance(st.Plan.At.Sub(e.clock.Now()))
			if n := e.drain(t); n != 0 || e.starts.count() != 1 {
				t.Fatalf("at the planned moment: %d delivered, %d started", n, e.starts.count())
			}
			// The wake never consumes the signal: the steer step of the resumed execution does.
			if e.pending(t) == nil {
				t.Fatal("the wake consumed the signal")
			}
		})
	}
}

// A signal stored while the recovery is between steps is seen by the park step, which
// brings its own timer forward, and is consumed once by the resumed Steer. A wake delivered
// after that does nothing: it must not bring the next wait's timer forward, and must not store
// the signal again (it would steer the later wait a second time).
func TestWakeAfterTheSignalWasConsumedDoesNothing(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			st := e.planned(t)
			// Planned, not parked yet: the operator's signal comes now.
			if _, err := e.ops.Steer(ctx, recovery.Steer{PaymentID: "pay_w", Action: recovery.ActionChargeNow,
				Reason: recovery.ReasonOperator, Actor: "jwt:ops"}); err != nil {
				t.Fatal(err)
			}
			sg := e.pending(t)
			if _, err := e.step(t, recovery.StepPark, st); err != nil {
				t.Fatalf("park with a signal waiting: %v", err)
			}
			if m, ok := e.timer(t, st); !ok || m.Waiting(e.clock.Now()) {
				t.Fatalf("timer %+v: want it brought forward by the park step", m)
			}
			// The resumed execution's steer step consumes the signal, and it parks again.
			st, err := e.step(t, recovery.StepSteer, st)
			if err != nil || st.Plan == nil || st.Plan.Reason != recovery.ReasonSteered {
				t.Fatalf("steer: %+v %v", st.Plan, err)
			}
			if e.pending(t) != nil {
				t.Fatal("the steer step left the signal")
			}
			if _, err := e.step(t, recovery.StepPark, st); err != nil {
				t.Fatalf("park again: %v", err)
			}
			rec, err := payments.GetRecovery(ctx, e.store, "pay_w")
			if err != nil || rec.Resume != "resume#"+recovery.ResumeName(st) || rec.State != payments.RecoveryScheduled {
				t.Fatalf("recovery %+v (%v)", rec, err)
			}
			// Now the relay delivers the wake (late), and the first timer, whose execution the
			// steer step above stands for.
			wake, _ := e.store.Get(ctx, outbox.Table, recovery.WakeID(*sg), "")
			if n := e.drain(t); n != 2 {
				t.Fatalf("drain: %d delivered, want the wake and the first timer", n)
			}
			if m, ok := e.timer(t, st); !ok || !m.DueAt.Equal(st.Plan.At) {
				t.Fatalf("the late wake moved the next wait's timer: %+v", m)
			}
			if e.pending(t) != nil {
				t.Fatalf("the late wake stored the signal again: %+v", e.pending(t))
			}
			if wake.PK == "" {
				t.Fatal("the wake was not in the outbox")
			}
		})
	}
}

// A provider event's steering is committed as an operator's is: the worker's transaction holds
// each running recovery's signal and its wake, so the relay only brings the timer forward, and
// an event that concerns no running recovery writes nothing.
func TestProviderEventCommitsTheSignalWithItsWake(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			st := e.parked(t)
			for _, other := range []webhooks.Steer{{Customer: "cus_other", PaymentMethod: "pm_x"}, {Invoice: "inv_other"}} {
				if ws, err := recovery.SteerMessages(ctx, e.store, other, t0); err != nil || len(ws) != 0 {
					t.Fatalf("%+v: %d writes (%v), want none", other, len(ws), err)
				}
			}
			ws, err := recovery.SteerMessages(ctx, e.store, webhooks.Steer{Customer: "cus_w", PaymentMethod: "pm_new"}, t0)
			if err != nil || len(ws) != 2 {
				t.Fatalf("%d writes (%v), want the signal and its wake", len(ws), err)
			}
			if err := e.store.Transact(ctx, ws...); err != nil {
				t.Fatal(err)
			}
			sg := e.pending(t)
			if sg == nil || sg.Action != recovery.ActionChargeNow || sg.PaymentMethod != "pm_new" || e.starts.count() != 0 {
				t.Fatalf("after the commit: signal %+v, %d started", sg, e.starts.count())
			}
			if n := e.drain(t); n != 2 {
				t.Fatalf("drain: %d delivered", n)
			}
			if in, ok := e.starts.get(recovery.ResumeName(st)); !ok || in.Resume != recovery.ResumeSteer || e.starts.count() != 1 {
				t.Fatalf("started %+v", e.starts.inputs)
			}
		})
	}
}
