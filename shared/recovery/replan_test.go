package recovery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
)

// reclassify stores the payment's decline as the provider reported it later, with the writes
// the webhook worker commits with it.
func (e steerEnv) reclassify(t *testing.T, code string) {
	t.Helper()
	ctx := context.Background()
	p, err := payments.Get(ctx, e.store, "pay_w")
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	p.Transition(provider.StatusDeclined, &provider.Decline{Code: code, ErrorCode: code}, nil, payments.VersionAt(at, provider.StatusDeclined), at)
	w, err := p.Put()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := recovery.ReplanMessages(ctx, e.store, "pay_w", at)
	if err != nil || len(ws) != 2 {
		t.Fatalf("replan writes %v, %v", ws, err)
	}
	if err := e.store.Transact(ctx, append([]store.Write{w}, ws...)...); err != nil {
		t.Fatal(err)
	}
}

// A decline reclassified from technical to authentication_required while the recovery waits:
// the steer step plans again from the new class and stops (no retry: the state machine's
// dead letter asks for the customer), consuming the signal; a recovery that woke by its
// timeout plans again in the charge step instead of charging.
func TestReclassifiedDeclineReplans(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name+"/steer", func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			st := e.parked(t)
			e.reclassify(t, "authentication_required")
			if sg := e.pending(t); sg == nil || sg.Action != recovery.ActionReplan {
				t.Fatalf("signal %+v", sg)
			}
			next, err := e.step(t, recovery.StepSteer, st)
			if err != nil || next.Plan == nil || next.Plan.Retry || !strings.Contains(next.Plan.Explanation, "reclassified the decline as auth") {
				t.Fatalf("steer: %+v %v", next.Plan, err)
			}
			if e.pending(t) != nil {
				t.Fatal("the signal was not consumed")
			}
		})
		t.Run(name+"/charge", func(t *testing.T) {
			e := newSteerEnv(t, newStore)
			st := e.parked(t)
			e.reclassify(t, "authentication_required")
			next, err := e.step(t, recovery.StepCharge, st)
			if err != nil || next.Plan == nil || next.Plan.Retry || len(next.Charges) != len(st.Charges) {
				t.Fatalf("charge after a reclassification: %+v attempts %d, %v", next.Plan, len(next.Charges), err)
			}
		})
	}
	t.Run("no running recovery", func(t *testing.T) {
		for _, newStore := range steerStores {
			e := newSteerEnv(t, newStore)
			if ws, err := recovery.ReplanMessages(context.Background(), e.store, "pay_w", t0); err != nil || len(ws) != 0 {
				t.Fatalf("writes for a payment without recovery: %v %v", ws, err)
			}
			break
		}
	})
}
