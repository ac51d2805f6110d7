package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/store"
)

// TestGetShowsRecoveryAndCard: a declined payment stores the card the provider named; the POST
// answer (replayed byte for byte) carries neither recovery nor card, while GET /payments/{id}
// keeps every field and adds the recovery's state and what the card's caps still allow.
func TestGetShowsRecoveryAndCard(t *testing.T) {
	f := newFixture(t)
	post := f.do(t, "POST", "/payments", "k-rec", body("pm_decline_funds"))
	if post.Code != 402 {
		t.Fatalf("POST %d %s", post.Code, post.Body)
	}
	var posted map[string]any
	if err := json.Unmarshal(post.Body.Bytes(), &posted); err != nil {
		t.Fatal(err)
	}
	if _, ok := posted["recovery"]; ok {
		t.Fatalf("a POST answer carries a recovery: %s", post.Body)
	}
	id := posted["id"].(string)
	p, err := Get(context.Background(), f.svc.Store, id)
	if err != nil || p.Card == nil || p.Card.Fingerprint != "fp_funds" || p.Card.Brand != "visa" {
		t.Fatalf("stored payment card %+v, %v", p.Card, err)
	}

	get := func() map[string]any {
		t.Helper()
		w := f.do(t, "GET", "/payments/"+id, "", "")
		if w.Code != 200 {
			t.Fatalf("GET %d %s", w.Code, w.Body)
		}
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		for k := range posted {
			if fmt.Sprint(v[k]) != fmt.Sprint(posted[k]) {
				t.Errorf("GET %s = %v, POST said %v", k, v[k], posted[k])
			}
		}
		return v
	}
	v := get()
	if _, ok := v["recovery"]; ok {
		t.Fatalf("no recovery yet, but GET shows one: %v", v["recovery"])
	}
	if c := v["card"].(map[string]any); c["brand"] != "visa" || c["attempts_left"] != float64(20) {
		t.Fatalf("card %v, want visa with 20 attempts left", c)
	}

	// The recovery steps store their state; 20 reattempts on the card use up Visa's cap.
	now := created.Add(time.Second)
	next := now.Add(time.Hour)
	rec := Recovery{PaymentID: id, State: RecoveryScheduled, Round: 1, Attempts: 3, NextAttemptAt: next,
		Reason: "backoff", Explanation: "Retrying soon.", CardBrand: "visa", Seq: 1}
	w, _ := rec.Writes()
	if err := f.svc.Store.Transact(context.Background(), w...); err != nil {
		t.Fatal(err)
	}
	if err := cardledger.Update(context.Background(), f.svc.Store, Table, "fp_funds", "visa", func(c *cardledger.Card) ([]store.Write, error) {
		for i := range 20 {
			c.Record(cardledger.Entry{Key: fmt.Sprint("a", i), At: now, Result: cardledger.ResultDeclined, Reattempt: true}, now)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	v = get()
	r := v["recovery"].(map[string]any)
	if r["state"] != "scheduled" || r["attempts"] != float64(3) || r["next_attempt_at"] != next.Format(time.RFC3339) ||
		r["reason"] != "backoff" || r["explanation"] != "Retrying soon." || r["round"] != float64(1) {
		t.Fatalf("recovery %v", r)
	}
	c := v["card"].(map[string]any)
	if c["attempts_left"] != float64(0) || c["limit"] != "visa_30d" || c["next_allowed_at"] != now.Add(30*24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("card %v, want 0 left until the window moves", c)
	}
	running, _, err := ListRunningRecoveries(context.Background(), f.svc.Store, 10, "")
	if err != nil || len(running) != 1 || running[0].PaymentID != id {
		t.Fatalf("running %+v, %v", running, err)
	}
	// Ended: off the running list, no next attempt shown.
	rec.State, rec.Seq = RecoveryStopped, 2
	w, _ = rec.Writes()
	if err := f.svc.Store.Transact(context.Background(), w...); err != nil {
		t.Fatal(err)
	}
	if r := get()["recovery"].(map[string]any); r["state"] != "stopped" || r["next_attempt_at"] != nil {
		t.Fatalf("ended recovery %v", r)
	}
	if running, _, _ := ListRunningRecoveries(context.Background(), f.svc.Store, 10, ""); len(running) != 0 {
		t.Fatalf("an ended recovery is still listed: %+v", running)
	}
}

// TestRecoveryPointers: while a recovery runs, a pointer under its customer and one under its
// invoice list it on their own index partitions, soonest next attempt first and paged; the
// write that ends it deletes both in its transaction, and an older state written late is
// refused whole, so it brings no pointer back.
func TestRecoveryPointers(t *testing.T) {
	for name, newStore := range testenv.Stores(Table) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			commit := func(r Recovery) error {
				t.Helper()
				ws, err := r.Writes()
				if err != nil {
					t.Fatal(err)
				}
				return st.Transact(ctx, ws...)
			}
			ids := func(index string, limit int) []string {
				t.Helper()
				var out []string
				cursor, pages := "", 0
				for {
					refs, next, err := ListRecoveriesOf(ctx, st, index, limit, cursor)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range refs {
						out = append(out, r.PaymentID)
					}
					if pages++; next == "" || pages > 10 {
						return out
					}
					cursor = next
				}
			}
			at := created.Add(time.Hour)
			running := []Recovery{
				{PaymentID: "pay_1", Customer: "cus_a", Invoice: "inv_1", NextAttemptAt: at.Add(2 * time.Hour)},
				{PaymentID: "pay_2", Customer: "cus_a", NextAttemptAt: at},
				{PaymentID: "pay_3", Customer: "cus_a", Invoice: "inv_3", NextAttemptAt: at.Add(time.Hour)},
				{PaymentID: "pay_4", Customer: "cus_b", Invoice: "inv_1", NextAttemptAt: at},
			}
			for _, r := range running {
				r.State, r.Round, r.Seq = RecoveryScheduled, 1, 2
				if err := commit(r); err != nil {
					t.Fatal(err)
				}
			}
			if got := fmt.Sprint(ids(CustomerRecoveries("cus_a"), 2)); got != "[pay_2 pay_3 pay_1]" {
				t.Fatalf("cus_a's recoveries in pages of 2: %s, want soonest first", got)
			}
			if got := fmt.Sprint(ids(InvoiceRecoveries("inv_1"), 1)); got != "[pay_4 pay_1]" {
				t.Fatalf("inv_1's recoveries: %s", got)
			}
			if got := ids(InvoiceRecoveries(""), 10); len(got) != 0 {
				t.Fatalf("a recovery with no invoice is listed under none: %v", got)
			}

			// pay_1 ends (stopped) and pay_3 recovers: no pointer of either is left.
			for _, r := range []Recovery{
				{PaymentID: "pay_1", Customer: "cus_a", Invoice: "inv_1", State: RecoveryStopped},
				{PaymentID: "pay_3", Customer: "cus_a", Invoice: "inv_3", State: RecoverySucceeded},
			} {
				r.Round, r.Seq = 1, 5
				if err := commit(r); err != nil {
					t.Fatal(err)
				}
				for _, pk := range []string{recoveryByCustomerPK(r.PaymentID), recoveryByInvoicePK(r.PaymentID)} {
					if _, err := st.Get(ctx, Table, pk, ""); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("%s %s: pointer %s is left (%v)", r.PaymentID, r.State, pk, err)
					}
				}
			}
			if got := fmt.Sprint(ids(CustomerRecoveries("cus_a"), 2)); got != "[pay_2]" {
				t.Fatalf("cus_a's recoveries after two ended: %s", got)
			}
			if got := fmt.Sprint(ids(InvoiceRecoveries("inv_1"), 2)); got != "[pay_4]" {
				t.Fatalf("inv_1's recoveries after pay_1 ended: %s", got)
			}

			// A running state older than the end, written late: refused with its pointers.
			late := running[0]
			late.State, late.Round, late.Seq = RecoveryCharging, 1, 4
			var ce *store.ConditionError
			if err := commit(late); !errors.As(err, &ce) || ce.Index != 0 {
				t.Fatalf("late running state: %v, want the recovery's condition to fail", err)
			}
			if got := ids(CustomerRecoveries("cus_a"), 10); fmt.Sprint(got) != "[pay_2]" {
				t.Fatalf("the late state brought a pointer back: %v", got)
			}
			if r, err := GetRecovery(ctx, st, "pay_1"); err != nil || r.State != RecoveryStopped {
				t.Fatalf("pay_1: %+v %v", r, err)
			}
		})
	}
}
