package inprocess

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/store"
)

// keyRecorder is the embedded store with every successful write's keys recorded against the
// payment being driven (label): the item's partition (table and PK) and, for an indexed item,
// the secondary-index partitions it enters or leaves. Write units follow DynamoDB's billing:
// one per started KiB of the item, twice inside a transaction; an index entry written or
// removed costs one per started KiB of the item (projection ALL).
type keyRecorder struct {
	localStore
	mu     sync.Mutex
	label  string
	writes int
	keys   map[partition]*keyUse
}

type partition struct {
	table string
	index bool
	pk    string
}

func (p partition) String() string {
	if p.index {
		return p.table + " gsi1pk=" + p.pk
	}
	return p.table + " pk=" + p.pk
}

type keyUse struct {
	labels map[string]bool
	units  float64
}

func (r *keyRecorder) setLabel(l string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.label = l
}

func (r *keyRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// units is the item's size as DynamoDB bills it, approximately: attribute names and values.
func units(it store.Item) float64 {
	size := len(it.PK) + len(it.SK) + len(it.Doc) + len(it.IndexPK) + len(it.IndexSK) + 48
	return math.Ceil(float64(size) / 1024)
}

func (r *keyRecorder) note(p partition, u float64) {
	use := r.keys[p]
	if use == nil {
		use = &keyUse{labels: map[string]bool{}}
		r.keys[p] = use
	}
	use.labels[r.label] = true
	use.units += u
}

// record notes writes ws, which succeeded, given each one's item before the write; tx is what
// each write's units are multiplied by (2 in a transaction of more than one write).
func (r *keyRecorder) record(ws []store.Write, olds []*store.Item, tx float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range ws {
		r.writes++
		var now store.Item
		pk := ""
		if w.Put != nil {
			now, pk = *w.Put, w.Put.PK
		} else {
			pk = w.Delete.PK
		}
		u := units(now)
		if old := olds[i]; old != nil {
			u = max(u, units(*old))
			if old.IndexPK != "" && old.IndexPK != now.IndexPK {
				r.note(partition{w.Table, true, old.IndexPK}, units(*old))
			}
		}
		r.note(partition{w.Table, false, pk}, tx*u)
		if now.IndexPK != "" {
			r.note(partition{w.Table, true, now.IndexPK}, units(now))
		}
	}
}

func (r *keyRecorder) before(ctx context.Context, ws []store.Write) []*store.Item {
	olds := make([]*store.Item, len(ws))
	for i, w := range ws {
		pk, sk := "", ""
		if w.Put != nil {
			pk, sk = w.Put.PK, w.Put.SK
		} else {
			pk, sk = w.Delete.PK, w.Delete.SK
		}
		if it, err := r.localStore.Get(ctx, w.Table, pk, sk); err == nil {
			olds[i] = &it
		}
	}
	return olds
}

func (r *keyRecorder) Transact(ctx context.Context, ws ...store.Write) error {
	olds := r.before(ctx, ws)
	err := r.localStore.Transact(ctx, ws...)
	if err == nil {
		tx := 1.0
		if len(ws) > 1 {
			tx = 2
		}
		r.record(ws, olds, tx)
	}
	return err
}

func (r *keyRecorder) PutAll(ctx context.Context, table string, items ...store.Item) error {
	ws := make([]store.Write, len(items))
	for i := range items {
		ws[i] = store.Write{Table: table, Put: &items[i]}
	}
	olds := r.before(ctx, ws)
	err := r.localStore.PutAll(ctx, table, items...)
	if err == nil {
		r.record(ws, olds, 1) // a batch: each item billed alone
	}
	return err
}

func (r *keyRecorder) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	return r.Transact(ctx, store.Write{Table: table, Put: &it, Cond: c})
}

func (r *keyRecorder) Replace(ctx context.Context, table string, it store.Item, c store.Cond) (*store.Item, error) {
	w := []store.Write{{Table: table, Put: &it, Cond: c}}
	olds := r.before(ctx, w)
	old, err := r.localStore.Replace(ctx, table, it, c)
	if err == nil {
		r.record(w, olds, 1)
	}
	return old, err
}

func (r *keyRecorder) Delete(ctx context.Context, table, pk, sk string, c store.Cond) error {
	w := []store.Write{{Table: table, Delete: &store.Key{PK: pk, SK: sk}, Cond: c}}
	olds := r.before(ctx, w)
	err := r.localStore.Delete(ctx, table, pk, sk, c)
	if err == nil && olds[0] != nil {
		r.record(w, olds, 1)
	}
	return err
}

// Design rate and limit: DynamoDB serves one partition, of a table or of a global secondary
// index, at most 1,000 write units a second.
const (
	designRate        = 10_000 // payments a second (docs/capacity.md)
	partitionWriteCap = 1_000  // write units a second
)

// TestNoHotPartition drives payments through the whole local stack (API, provider, webhooks,
// outbox relay, recoveries, refunds, replays), one at a time until everything it started has
// settled, over 3 customers and 4 cards, and records every key each payment's flows write.
// No partition may be written by more payments than the largest legitimate group (a
// customer's payments: a third of them; a card's are a quarter), and the shards of each index
// partition that every payment writes must each stay under DynamoDB's 1,000 write units a
// second at 10,000 payments a second.
func TestNoHotPartition(t *testing.T) {
	const (
		nPayments  = 24
		nCustomers = 3
		nCards     = 4
	)
	var rec *keyRecorder
	s := newStack(t, Config{TimeFactor: recoveryFactor, ReconcileEvery: -1, wrapStore: func(ls localStore) localStore {
		rec = &keyRecorder{localStore: ls, keys: map[partition]*keyUse{}}
		return rec
	}})
	for k := range nCards {
		programCard(t, s.SimURL(), fmt.Sprintf("pm_hot_card%d", k), "", 0)
	}
	ctx := context.Background()
	settled := func() bool {
		st := simStats(t, s)
		if st["outbox_entries"] != float64(0) || !queueEmpty(s, webhookQueue) || !queueEmpty(s, resolveQueue) || s.outboxPending(ctx) != 0 {
			return false
		}
		execs, err := s.runner.ListExecutions(ctx, recoveryMachine)
		if err != nil {
			return false
		}
		for _, e := range execs {
			if e.Status == asl.StatusRunning {
				return false
			}
		}
		return true
	}
	mix := map[string]int{}
	declinedOf := map[string][]string{} // a customer's declined payments, by label
	for i := range nPayments {
		label := fmt.Sprintf("payment %d", i)
		rec.setLabel(label)
		key := fmt.Sprintf("hot-%d", i)
		pm := fmt.Sprintf("pm_hot_card%d", i%nCards)
		declined := i%6 == 5 // about 17%: a decline recovered by the next charge
		if declined {
			programCard(t, s.SimURL(), pm, "insufficient_funds", 1)
			mix["declined then recovered"]++
			declinedOf[fmt.Sprintf("cus_hot%d", i%nCustomers)] = append(declinedOf[fmt.Sprintf("cus_hot%d", i%nCustomers)], label)
		}
		body := fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_hot%d","payment_method":%q,"invoice":"inv_hot_%d"}`,
			1000+i, i%nCustomers, pm, i)
		a := call(t, "POST", s.APIURL()+"/payments", key, body)
		var v payments.View
		if err := json.Unmarshal([]byte(a.body), &v); err != nil || (a.status != http.StatusCreated && a.status != http.StatusPaymentRequired) {
			t.Fatalf("%s: %d %s", label, a.status, a.body)
		}
		if i%3 == 0 {
			if r := call(t, "POST", s.APIURL()+"/payments", key, body); r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%s: replay %d %s", label, r.status, r.body)
			}
			mix["replayed"]++
		}
		eventually(t, 30*time.Second, label+" succeeds", func() bool { return getPayment(t, s, v.ID).Status == "succeeded" })
		if i%4 == 1 {
			if r := refund(t, s, v.ID, key+"-refund", `{}`); r.status != http.StatusCreated {
				t.Fatalf("%s: refund %d %s", label, r.status, r.body)
			}
			mix["refunded"]++
			eventually(t, 30*time.Second, label+" is refunded", func() bool { return getPayment(t, s, v.ID).Status == "refunded" })
		}
		// Everything the payment started has run: settled, and no write between two looks.
		last := -1
		eventually(t, 30*time.Second, label+" settles", func() bool {
			n := rec.count()
			quiet := settled() && n == last
			last = n
			return quiet
		})
	}
	t.Logf("%d payments over %d customers and %d cards: %v", nPayments, nCustomers, nCards, mix)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The index partitions every payment writes, each spread over shards.
	day := s.clock.Now()
	sharded := map[string]store.Shards{}
	for _, sh := range []store.Shards{outbox.Due, payments.RunningRecoveries, payments.DayIndex(day), payments.DayIndex(day.Add(-24 * time.Hour))} {
		sharded[sh.Base] = sh
	}
	shardOf := func(p partition) (store.Shards, bool) {
		for _, sh := range sharded {
			if p.index && sh.Holds(p.pk) {
				return sh, true
			}
		}
		return store.Shards{}, false
	}
	bound := (nPayments + nCustomers - 1) / nCustomers // a customer's payments: the largest group
	type row struct {
		p        partition
		payments int
		units    float64
	}
	var rows []row
	logical := map[string]float64{} // write units of each sharded partition, all shards
	for p, use := range rec.keys {
		// The local event log stands in for EventBridge PutEvents (docs/capacity.md gives its
		// quota); in AWS nothing writes it.
		if p.table == feed.Table {
			continue
		}
		rows = append(rows, row{p, len(use.labels), use.units})
		if sh, ok := shardOf(p); ok {
			logical[sh.Base] += use.units
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.payments, a.payments), cmp.Compare(b.units, a.units), strings.Compare(a.p.String(), b.p.String()))
	})
	for _, r := range rows[:min(10, len(rows))] {
		t.Logf("%-50s written by %2d payments, %3.0f write units", r.p, r.payments, r.units)
	}
	for _, r := range rows {
		if r.payments > bound {
			t.Errorf("hot partition: %s is written by %d of %d payments (bound %d, a customer's)", r.p, r.payments, nPayments, bound)
		}
	}
	// A sharded partition's shards share its writes: each must stay under the limit at the
	// design rate. (A key within the bound takes its own customer's or card's rate, not this.)
	for base, u := range logical {
		sh := sharded[base]
		perShard := u / nPayments * designRate / float64(sh.N)
		t.Logf("%s: %.2f index write units per payment over %d shards: %.0f a second per shard at %d payments/s",
			base, u/nPayments, sh.N, perShard, designRate)
		if perShard > partitionWriteCap {
			t.Errorf("hot partition: each of %s's %d shards takes %.0f write units/s at %d payments/s (limit %d)",
				base, sh.N, perShard, designRate, partitionWriteCap)
		}
	}
	// A running recovery's pointers: its customer's index partition is written by that
	// customer's recoveries alone, its invoice's by its own.
	for c := range nCustomers {
		cus := fmt.Sprintf("cus_hot%d", c)
		var got []string
		if use := rec.keys[partition{payments.Table, true, payments.CustomerRecoveries(cus)}]; use != nil {
			got = slices.Sorted(maps.Keys(use.labels))
		}
		if want := slices.Sorted(slices.Values(declinedOf[cus])); !slices.Equal(got, want) {
			t.Errorf("%s's recoveries index partition written by %v, want its declined payments %v", cus, got, want)
		}
	}
	for i := range nPayments {
		use := rec.keys[partition{payments.Table, true, payments.InvoiceRecoveries(fmt.Sprintf("inv_hot_%d", i))}]
		label := fmt.Sprintf("payment %d", i)
		if declined := i%6 == 5; declined != (use != nil) || (use != nil && (len(use.labels) != 1 || !use.labels[label])) {
			t.Errorf("inv_hot_%d's recoveries index partition: %+v (declined %v)", i, use, declined)
		}
	}
	if _, ok := logical[outbox.Due.Base]; !ok || len(rows) < nPayments {
		t.Fatalf("%d partitions recorded, outbox due list seen %v: the recorder missed the flows", len(rows), ok)
	}
}
