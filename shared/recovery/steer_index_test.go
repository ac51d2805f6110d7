package recovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// readLog is a store that records what is read: the key of every Get and the partition of
// every Query.
type readLog struct {
	store.Store
	mu      sync.Mutex
	gets    []string
	queries []string
}

func (r *readLog) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	r.mu.Lock()
	r.gets = append(r.gets, pk)
	r.mu.Unlock()
	return r.Store.Get(ctx, table, pk, sk)
}

func (r *readLog) Query(ctx context.Context, q store.Query) (store.Page, error) {
	r.mu.Lock()
	r.queries = append(r.queries, q.PK)
	r.mu.Unlock()
	return r.Store.Query(ctx, q)
}

// runningRecovery commits a running recovery of payment id, as the recovery steps write one.
func runningRecovery(t *testing.T, st store.Store, id, customer, invoice string, next time.Time) {
	t.Helper()
	ws, err := payments.Recovery{PaymentID: id, State: payments.RecoveryScheduled, Round: 1, Seq: 1,
		Customer: customer, Invoice: invoice, NextAttemptAt: next}.Writes()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Transact(context.Background(), ws...); err != nil {
		t.Fatal(err)
	}
}

// steered decodes the signals among ws, in order.
func steered(t *testing.T, ws []store.Write) []recovery.Steer {
	t.Helper()
	var out []recovery.Steer
	for _, w := range ws {
		if w.Put == nil || !strings.HasPrefix(w.Put.PK, "steer#") {
			continue
		}
		var sg recovery.Steer
		if err := json.Unmarshal(w.Put.Doc, &sg); err != nil {
			t.Fatal(err)
		}
		out = append(out, sg)
	}
	if len(out)*2 != len(ws) {
		t.Fatalf("%d writes for %d signals, want a wake with each", len(ws), len(out))
	}
	return out
}

func paymentIDs(sgs []recovery.Steer) []string {
	var ids []string
	for _, sg := range sgs {
		ids = append(ids, sg.PaymentID)
	}
	return ids
}

// A customer's event reads that customer's index partition, page by page, and that
// customer's recoveries; an invoice's, that invoice's. Another customer's recoveries are never
// read, and a recovery that ended after the index was written is passed over.
func TestSteeringReadsOnlyTheOwnersRecoveries(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			recovery.SetSteerPage(t, 3)
			var mine []string
			for i := range 7 {
				id := fmt.Sprintf("pay_w%d", i)
				mine = append(mine, id)
				// Soonest first is the order of the ids.
				runningRecovery(t, st, id, "cus_w", fmt.Sprintf("inv_w%d", i), t0.Add(time.Duration(i+1)*time.Hour))
			}
			for i := range 5 {
				runningRecovery(t, st, fmt.Sprintf("pay_o%d", i), "cus_other", fmt.Sprintf("inv_o%d", i), t0.Add(time.Minute))
			}
			check := func(ev webhooks.Steer, wantIndex string, wantPages int, want []string, action string) {
				t.Helper()
				log := &readLog{Store: st}
				ws, err := recovery.SteerMessages(ctx, log, ev, t0)
				if err != nil {
					t.Fatal(err)
				}
				sgs := steered(t, ws)
				if got := paymentIDs(sgs); !slices.Equal(got, want) {
					t.Fatalf("%+v steered %v, want %v", ev, got, want)
				}
				for _, sg := range sgs {
					if sg.Action != action || (action == recovery.ActionChargeNow && sg.PaymentMethod != ev.PaymentMethod) {
						t.Fatalf("signal %+v, want %s", sg, action)
					}
				}
				if len(log.queries) != wantPages {
					t.Errorf("%+v: %d queries %v, want %d pages", ev, len(log.queries), log.queries, wantPages)
				}
				for _, q := range log.queries {
					if q != wantIndex {
						t.Errorf("%+v queried %q, want only %q", ev, q, wantIndex)
					}
				}
				for _, pk := range log.gets {
					if strings.Contains(pk, "pay_o") {
						t.Errorf("%+v read another customer's %s", ev, pk)
					}
				}
			}
			check(webhooks.Steer{Customer: "cus_w", PaymentMethod: "pm_new"}, payments.CustomerRecoveries("cus_w"), 3, mine, recovery.ActionChargeNow)
			check(webhooks.Steer{Customer: "cus_w", Invoice: "inv_w3"}, payments.InvoiceRecoveries("inv_w3"), 1, []string{"pay_w3"}, recovery.ActionStop)
			check(webhooks.Steer{Customer: "cus_w", Invoice: "inv_none"}, payments.InvoiceRecoveries("inv_none"), 1, nil, "")

			// pay_w6's recovery ended, and its index entry has not caught up yet (DynamoDB's
			// index lags): written here as the table alone would hold it.
			doc, _ := json.Marshal(payments.Recovery{PaymentID: "pay_w6", State: payments.RecoveryStopped, Round: 1, Seq: 9,
				Customer: "cus_w", Invoice: "inv_w6"})
			if err := st.Put(ctx, payments.Table, store.Item{PK: "recovery#pay_w6", Doc: doc, Version: 9}, store.Cond{}); err != nil {
				t.Fatal(err)
			}
			check(webhooks.Steer{Customer: "cus_w", PaymentMethod: "pm_new"}, payments.CustomerRecoveries("cus_w"), 3, mine[:6], recovery.ActionChargeNow)
		})
	}
}

// One event steers at most MaxSteered recoveries (two writes each, within DynamoDB's 100 a
// transaction): the customer's soonest.
func TestSteeringIsBounded(t *testing.T) {
	for name, newStore := range steerStores {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			var want []string
			for i := range recovery.MaxSteered + 5 {
				id := fmt.Sprintf("pay_%03d", i)
				runningRecovery(t, st, id, "cus_many", "", t0.Add(time.Duration(i+1)*time.Minute))
				if i < recovery.MaxSteered {
					want = append(want, id)
				}
			}
			ws, err := recovery.SteerMessages(context.Background(), st, webhooks.Steer{Customer: "cus_many", PaymentMethod: "pm_new"}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := paymentIDs(steered(t, ws)); !slices.Equal(got, want) {
				t.Fatalf("steered %d: %v, want the %d soonest", len(got), got, recovery.MaxSteered)
			}
		})
	}
}

// A recovery that was stopped, or that recovered the payment, leaves no pointer under its
// customer or its invoice: the step that ends it deletes them in its own transaction.
func TestEndedRecoveryLeavesNoPointer(t *testing.T) {
	ctx := context.Background()
	owned := func(t *testing.T, st store.Store) []string {
		t.Helper()
		var ids []string
		for _, index := range []string{payments.CustomerRecoveries("cus_w"), payments.InvoiceRecoveries("inv_w")} {
			refs, _, err := payments.ListRecoveriesOf(ctx, st, index, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range refs {
				ids = append(ids, index+":"+r.PaymentID)
			}
		}
		return ids
	}
	t.Run("stopped", func(t *testing.T) {
		for name, newStore := range steerStores {
			t.Run(name, func(t *testing.T) {
				e := newSteerEnv(t, newStore)
				st := e.parked(t)
				if got := owned(t, e.store); len(got) != 2 {
					t.Fatalf("while parked: %v, want a pointer under the customer and one under the invoice", got)
				}
				if _, err := e.ops.Steer(ctx, recovery.Steer{PaymentID: "pay_w", Action: recovery.ActionStop,
					Reason: recovery.ReasonOperator, Actor: "jwt:ops"}); err != nil {
					t.Fatal(err)
				}
				if st, err := e.step(t, recovery.StepSteer, st); err != nil || st.Result != recovery.ResultStopped {
					t.Fatalf("steer: %+v %v", st, err)
				}
				if got := owned(t, e.store); len(got) != 0 {
					t.Fatalf("stopped, pointers left: %v", got)
				}
				// A late repeat of the park step: its running state is older than the stop, so
				// it is dropped, and its pointers with it.
				if _, err := e.step(t, recovery.StepPark, st); err != nil {
					t.Fatalf("late park: %v", err)
				}
				if got := owned(t, e.store); len(got) != 0 {
					t.Fatalf("a late running state brought back pointers: %v", got)
				}
				if rec, err := payments.GetRecovery(ctx, e.store, "pay_w"); err != nil || rec.State != payments.RecoveryStopped {
					t.Fatalf("recovery %+v (%v), want stopped", rec, err)
				}
			})
		}
	})
	t.Run("recovered", func(t *testing.T) {
		clk := clock.NewFake(t0)
		steps, st, _ := newSteps(t, recoverytest.NewProvider(clk.Now), clk)
		putPayment(t, st, payments.Payment{ID: "pay_w", Status: provider.StatusDeclined, Customer: "cus_w", Invoice: "inv_w",
			PaymentMethod: "pm", ProviderPaymentID: "pi_w", Amount: 1000, Currency: "usd",
			Decline: &provider.Decline{Code: "processing_error"}, CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)})
		run := func(step string, s recovery.State) recovery.State {
			t.Helper()
			in, _ := json.Marshal(recovery.StepInput{Step: step, State: s, Now: clk.Now()})
			out, err := steps.Handle(ctx, in)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var next recovery.State
			if err := json.Unmarshal(out, &next); err != nil {
				t.Fatal(err)
			}
			return next
		}
		s := run(recovery.StepPlan, recovery.State{PaymentID: "pay_w", Invoice: "inv_w", Round: 1})
		if got := owned(t, st); s.Plan == nil || !s.Plan.Retry || len(got) != 2 {
			t.Fatalf("planned %+v: pointers %v, want two", s.Plan, got)
		}
		clk.Advance(s.Plan.At.Sub(clk.Now()))
		if s = run(recovery.StepCharge, s); s.Result != recovery.ResultSucceeded {
			t.Fatalf("charge: %+v", s)
		}
		if got := owned(t, st); len(got) != 0 {
			t.Fatalf("recovered, pointers left: %v", got)
		}
	})
}
