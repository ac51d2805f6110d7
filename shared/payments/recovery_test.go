package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

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
	w, _ := rec.Write()
	if err := f.svc.Store.Transact(context.Background(), w); err != nil {
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
	w, _ = rec.Write()
	if err := f.svc.Store.Transact(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if r := get()["recovery"].(map[string]any); r["state"] != "stopped" || r["next_attempt_at"] != nil {
		t.Fatalf("ended recovery %v", r)
	}
	if running, _, _ := ListRunningRecoveries(context.Background(), f.svc.Store, 10, ""); len(running) != 0 {
		t.Fatalf("an ended recovery is still listed: %+v", running)
	}
}
