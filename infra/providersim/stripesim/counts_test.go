package stripesim

import (
	"context"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// walked counts the counted buckets the slow way, by reading every page.
func (h *harness) walked(t *testing.T) (pis, events int) {
	t.Helper()
	if err := h.sim.db.View(func(tx *bolt.Tx) error {
		pis, events = bucket(tx, bucketPIs).Stats().KeyN, bucket(tx, bucketEvents).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pis, events
}

func (h *harness) sameCounts(t *testing.T, when string) (pis, events int) {
	t.Helper()
	st, err := h.sim.Stats()
	if err != nil {
		t.Fatal(err)
	}
	pis, events = h.walked(t)
	if st.PaymentIntents != pis || st.Events != events {
		t.Fatalf("%s: stats say %d PaymentIntents and %d events, the file holds %d and %d",
			when, st.PaymentIntents, st.Events, pis, events)
	}
	return pis, events
}

// TestCountsKeptWithTheirBuckets: the totals of GET /_sim/stats, kept beside the writes, are
// what a walk of the file counts, through creates, replays, declines, updates, captures and
// a forgotten PaymentIntent, and after reopening a file written before counts were kept.
func TestCountsKeptWithTheirBuckets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var ids []string
	for i := range 12 { // a quarter declined
		pm := "pm_card_visa"
		if i%4 == 3 {
			pm = "pm_card_visa_chargeDeclinedInsufficientFunds"
		}
		pi, _ := h.client.V1PaymentIntents.Create(ctx, stripeCreate(pm, fmt.Sprint("count-", i)))
		if pi != nil {
			ids = append(ids, pi.ID)
		}
		// The same key again: a replay adds nothing.
		_, _ = h.client.V1PaymentIntents.Create(ctx, stripeCreate(pm, fmt.Sprint("count-", i)))
	}
	pis, events := h.sameCounts(t, "after creates and replays")
	if pis != len(ids) || events < pis {
		t.Fatalf("%d PaymentIntents and %d events for %d created", pis, events, len(ids))
	}
	if st, b := h.control(t, "POST", "/_sim/payment_intents/"+ids[0]+"/dispute", map[string]any{"status": "needs_response"}); st != 200 {
		t.Fatalf("dispute: %d %s", st, b)
	}
	if _, e := h.sameCounts(t, "after a dispute"); e <= events {
		t.Fatalf("a dispute recorded no event: %d events, %d before", e, events)
	}
	if st, b := h.control(t, "DELETE", "/_sim/payment_intents/"+ids[1], nil); st != 200 {
		t.Fatalf("forget: %d %s", st, b)
	}
	if p, _ := h.sameCounts(t, "after a PaymentIntent was forgotten"); p != pis-1 {
		t.Fatalf("%d PaymentIntents after one of %d was forgotten", p, pis)
	}

	// A file from before the counts: they are counted once when it is opened.
	if err := h.sim.db.Update(func(tx *bolt.Tx) error {
		for _, b := range counted {
			if err := bucket(tx, bucketMeta).Delete(countKey(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.close()
	h.open(t)
	if p, _ := h.sameCounts(t, "after reopening a file without counts"); p != pis-1 {
		t.Fatalf("%d PaymentIntents after reopening, want %d", p, pis-1)
	}
	_, _ = h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "count-after"))
	if p, _ := h.sameCounts(t, "after a create on the reopened file"); p != pis {
		t.Fatalf("%d PaymentIntents, want %d", p, pis)
	}
}
