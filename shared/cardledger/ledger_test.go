package cardledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/store"
)

// base is the fixed clock every case starts from.
var base = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

const table = "payments"

// model counts, by brute force, what a cap allows at t: the attempts of the window ending at t
// that the cap counts.
func model(c cardledger.Cap, es []cardledger.Entry, t time.Time) int {
	n := 0
	for _, e := range es {
		counted := e.Reattempt
		if c.Counts == cardledger.CountDeclines {
			counted = e.Result == cardledger.ResultDeclined || e.Result == cardledger.ResultPending
		}
		if counted && e.At.After(t.Add(-c.Per)) && !e.At.After(t) {
			n++
		}
	}
	return n
}

// TestAllowanceOverClockOffsets checks the cap windows against the brute-force model, for
// histories placed at random offsets from a fixed clock: Left is what the tightest cap leaves;
// when nothing is left, NextAt is the first whole second at which one more attempt is allowed
// (allowed at NextAt, not one second before), and it names the cap that blocks.
func TestAllowanceOverClockOffsets(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		brand := rapid.SampledFrom([]string{"visa", "mastercard", "amex"}).Draw(rt, "brand")
		n := rapid.IntRange(0, 60).Draw(rt, "n")
		// Dense histories (within 2 days) reach the 24 h cap; sparse ones (40 days) test the
		// 30-day windows' edges.
		spread := rapid.SampledFrom([]time.Duration{2 * 24 * time.Hour, 40 * 24 * time.Hour}).Draw(rt, "spread")
		var es []cardledger.Entry
		for i := range n {
			off := time.Duration(rapid.Int64Range(0, int64(spread/time.Second)).Draw(rt, "off")) * time.Second
			es = append(es, cardledger.Entry{Key: fmt.Sprint("k", i), At: base.Add(off),
				Result:    rapid.SampledFrom([]string{cardledger.ResultDeclined, cardledger.ResultPending, cardledger.ResultSucceeded, cardledger.ResultFailed}).Draw(rt, "outcome"),
				Reattempt: rapid.Bool().Draw(rt, "reattempt")})
		}
		now := base.Add(spread).Add(time.Duration(rapid.Int64Range(0, 3*24*3600).Draw(rt, "after")) * time.Second)
		c := cardledger.Card{Fingerprint: "fp", Brand: brand, Entries: es}
		a := c.Allowance(now)
		caps := cardledger.Caps(brand)
		if a.Capped != (len(caps) > 0) {
			rt.Fatalf("capped %v for %s", a.Capped, brand)
		}
		if !a.Capped {
			return
		}
		left := 1 << 30
		for _, cp := range caps {
			left = min(left, max(cp.Max-model(cp, es, now), 0))
		}
		if a.Left != left {
			rt.Fatalf("left %d, model %d", a.Left, left)
		}
		if left > 0 {
			if !a.NextAt.Equal(now) {
				rt.Fatalf("next at %s with %d left", a.NextAt, left)
			}
			return
		}
		allowed := func(t time.Time) bool {
			for _, cp := range caps {
				if model(cp, es, t) >= cp.Max {
					return false
				}
			}
			return true
		}
		if !allowed(a.NextAt) || (a.NextAt.After(now) && allowed(a.NextAt.Add(-time.Second))) {
			rt.Fatalf("next at %s is not the first allowed second (now %s)", a.NextAt, now)
		}
		blocking := false
		for _, cp := range caps {
			if cp.Limit == a.Limit && model(cp, es, now) >= cp.Max {
				blocking = true
			}
		}
		if !blocking {
			rt.Fatalf("limit %s does not block", a.Limit)
		}
	})
}

func TestRecordRepeatsAndForgets(t *testing.T) {
	c := cardledger.Card{Fingerprint: "fp", Brand: "visa"}
	c.Record(cardledger.Entry{Key: "a", At: base, Result: cardledger.ResultPending, Reattempt: true}, base)
	c.Record(cardledger.Entry{Key: "a", At: base, Result: cardledger.ResultPending, Reattempt: true}, base)
	c.Record(cardledger.Entry{Key: "a", At: base, Result: cardledger.ResultDeclined, Reattempt: true}, base)
	if len(c.Entries) != 1 || c.Entries[0].Result != cardledger.ResultDeclined {
		t.Fatalf("a repeated key must update its one entry: %+v", c.Entries)
	}
	later := base.Add(cardledger.Horizon + time.Second)
	c.Record(cardledger.Entry{Key: "b", At: later}, later)
	if len(c.Entries) != 1 || c.Entries[0].Key != "b" {
		t.Fatalf("an entry older than the horizon must be forgotten: %+v", c.Entries)
	}
}

// stores are both forms of the ledger's store: bbolt, and DynamoDB Local (skipped when the
// test servers are not up, failed when they are required).
var stores = testenv.Stores(table)

// TestConcurrentReservationsKeepTheCap races 30 reservations for one Visa card, each checked
// and recorded in one transaction with another write of its attempt: exactly 20 commit (with
// their other write), the rest are refused by the cap, and a refused one wrote nothing.
func TestConcurrentReservationsKeepTheCap(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			fp := "fp_" + name
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := map[string]int{}
			for i := range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprint("attempt-", i)
					err := cardledger.Update(t.Context(), st, table, fp, "visa", func(c *cardledger.Card) ([]store.Write, error) {
						if a := c.Allowance(base); a.Left == 0 {
							return nil, cardledger.ErrCapped
						}
						c.Record(cardledger.Entry{Key: key, At: base, Result: cardledger.ResultPending, Reattempt: true}, base)
						return []store.Write{{Table: table, Put: &store.Item{PK: "other#" + key + fp, Doc: []byte(`{}`)}}}, nil
					})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						got["ok"]++
					case errors.Is(err, cardledger.ErrCapped):
						got["capped"]++
						if _, err := st.Get(t.Context(), table, "other#"+key+fp, ""); !errors.Is(err, store.ErrNotFound) {
							t.Errorf("a refused attempt committed its other write: %v", err)
						}
					default:
						got["error"]++
						t.Errorf("update: %v", err)
					}
				}()
			}
			wg.Wait()
			if got["ok"] != 20 || got["capped"] != 10 {
				t.Fatalf("outcomes %v; want 20 ok, 10 capped", got)
			}
			c, err := cardledger.Get(t.Context(), st, table, fp)
			if err != nil {
				t.Fatal(err)
			}
			if a := c.Allowance(base); len(c.Entries) != 20 || a.Left != 0 || a.Limit != "visa_30d" ||
				!a.NextAt.Equal(base.Add(30*24*time.Hour)) {
				t.Fatalf("ledger %d entries, allowance %+v", len(c.Entries), a)
			}
		})
	}
}
