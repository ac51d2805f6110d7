package recovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

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

// signals records SendTaskSuccess; a token is good once (then its wait is over).
type signals struct {
	mu   sync.Mutex
	sent map[string]string // token -> output
}

func (s *signals) SendTaskSuccess(_ context.Context, token string, output []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sent[token]; ok {
		return recovery.ErrTaskGone
	}
	s.sent[token] = string(output)
	return nil
}

func (s *signals) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.sent) }

// steerEnv is operator-api's Steerer (with no Signal), the relay's (with one), the
// recovery steps and the relay, on one store with a declined payment in recovery.
type steerEnv struct {
	store   store.Store
	ops     *recovery.Steerer
	signals *signals
	relay   *outbox.Relay
	steps   *recovery.Steps
}

func newSteerEnv(t *testing.T, newStore func(t *testing.T) store.Store) steerEnv {
	t.Helper()
	st := newStore(t)
	clk := clock.NewFake(t0)
	sig := &signals{sent: map[string]string{}}
	relayed := &recovery.Steerer{Store: st, Signal: sig, Now: clk.Now}
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
	return steerEnv{store: st, signals: sig, steps: steps,
		ops: &recovery.Steerer{Store: st, Now: clk.Now},
		relay: &outbox.Relay{Store: st, Now: clk.Now, Log: discard(), Rand: rand.New(rand.NewPCG(3, 4)),
			Handlers: map[string]outbox.Handler{recovery.KindWake: relayed.WakeFollowOn()}}}
}

// planned runs the plan step of the payment's first round, which plans a retry.
func (e steerEnv) planned(t *testing.T) recovery.State {
	t.Helper()
	st, err := e.step(t, recovery.StepPlan, recovery.State{PaymentID: "pay_w", Invoice: "inv_w", Round: 1}, "")
	if err != nil || st.Plan == nil || !st.Plan.Retry {
		t.Fatalf("plan: %+v %v", st.Plan, err)
	}
	return st
}

// parked plans the first round and parks its wait under token.
func (e steerEnv) parked(t *testing.T, token string) recovery.State {
	t.Helper()
	st := e.planned(t)
	if _, err := e.step(t, recovery.StepPark, st, token); err != nil {
		t.Fatalf("park: %v", err)
	}
	return st
}

// step runs one step of the state machine; the park step's SteeredError is returned.
func (e steerEnv) step(t *testing.T, name string, st recovery.State, token string) (recovery.State, error) {
	t.Helper()
	in, _ := json.Marshal(recovery.StepInput{Step: name, State: st, Token: token, Now: t0})
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

// An operator's charge-now on a parked recovery commits the signal and its wake in one
// transaction and ends no wait itself; the relay's delivery ends the wait with the signal's
// action, once: a second delivery finds the wait over (ErrTaskGone) and is done.
func TestRelayedSteerCommitsTheSignalWithItsWake(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			e.parked(t, "tok-1")
			if _, err := e.ops.Steer(ctx, recovery.Steer{PaymentID: "pay_w", Action: recovery.ActionChargeNow,
				Reason: recovery.ReasonOperator, Actor: "jwt:ops"}); err != nil {
				t.Fatal(err)
			}
			sg := e.pending(t)
			if sg == nil || sg.Action != recovery.ActionChargeNow || e.signals.count() != 0 {
				t.Fatalf("after the steer: signal %+v, %d waits ended", sg, e.signals.count())
			}
			it, err := e.store.Get(ctx, outbox.Table, recovery.WakeID(*sg), "")
			if err != nil {
				t.Fatalf("the wake %s is not in the outbox: %v", recovery.WakeID(*sg), err)
			}
			m, err := outbox.Decode(it)
			if err != nil || m.Kind != recovery.KindWake {
				t.Fatalf("wake %+v (%v)", m, err)
			}
			if d, f, err := e.relay.Drain(ctx); d != 1 || f != 0 || err != nil {
				t.Fatalf("drain: %d delivered, %d failed (%v)", d, f, err)
			}
			if e.signals.count() != 1 || e.signals.sent["tok-1"] != `{"action":"charge_now"}` {
				t.Fatalf("waits ended: %v", e.signals.sent)
			}
			if err := e.relay.Deliver(ctx, m, 0); err != nil || e.signals.count() != 1 {
				t.Fatalf("second delivery: %v, %d waits ended", err, e.signals.count())
			}
			// The wake never consumes the signal: the steer step after the wait does.
			if e.pending(t) == nil {
				t.Fatal("the wake consumed the signal")
			}
		})
	}
}

// A wake delivered after its signal was consumed does nothing: the signal came while the
// recovery was between steps, so the park step saw it and the steer step consumed it, and the
// recovery parked again for its next charge. The late wake must not end that new wait, and
// must not store the signal again (it would steer the later wait a second time).
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
			var steered *recovery.SteeredError
			if _, err := e.step(t, recovery.StepPark, st, "tok-1"); !errors.As(err, &steered) {
				t.Fatalf("park with a signal waiting: %v, want SteeredError", err)
			}
			st, err := e.step(t, recovery.StepSteer, st, "")
			if err != nil || st.Plan == nil || st.Plan.Reason != recovery.ReasonSteered {
				t.Fatalf("steer: %+v %v", st.Plan, err)
			}
			if e.pending(t) != nil {
				t.Fatal("the steer step left the signal")
			}
			// The steered charge's wait (a second): parked with a new token.
			if _, err := e.step(t, recovery.StepPark, st, "tok-2"); err != nil {
				t.Fatalf("park again: %v", err)
			}
			rec, err := payments.GetRecovery(ctx, e.store, "pay_w")
			if err != nil || rec.TaskToken != "tok-2" || rec.State != payments.RecoveryScheduled {
				t.Fatalf("recovery %+v (%v)", rec, err)
			}
			// Now the relay delivers the wake.
			if d, f, err := e.relay.Drain(ctx); d != 1 || f != 0 || err != nil {
				t.Fatalf("drain: %d delivered, %d failed (%v)", d, f, err)
			}
			if e.signals.count() != 0 || e.pending(t) != nil {
				t.Fatalf("the late wake ended %v, pending signal %+v", e.signals.sent, e.pending(t))
			}
		})
	}
}

// A provider event's steering is committed as an operator's is: the worker's transaction holds
// each running recovery's signal and its wake, so the relay only ends the wait, and an event
// that concerns no running recovery writes nothing.
func TestProviderEventCommitsTheSignalWithItsWake(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			ctx := context.Background()
			e.parked(t, "tok-1")
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
			if sg == nil || sg.Action != recovery.ActionChargeNow || sg.PaymentMethod != "pm_new" || e.signals.count() != 0 {
				t.Fatalf("after the commit: signal %+v, %d waits ended", sg, e.signals.count())
			}
			if d, f, err := e.relay.Drain(ctx); d != 1 || f != 0 || err != nil {
				t.Fatalf("drain: %d delivered, %d failed (%v)", d, f, err)
			}
			if e.signals.count() != 1 || e.signals.sent["tok-1"] != `{"action":"charge_now"}` {
				t.Fatalf("waits ended: %v", e.signals.sent)
			}
		})
	}
}
