package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/store"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func newStore(t testing.TB) store.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flaky fails its first n deliveries, then records each one.
type flaky struct {
	mu        sync.Mutex
	fail      int
	failures  int
	delivered []string
}

func (f *flaky) handle(_ context.Context, m Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		f.failures++
		return errors.New("throttled")
	}
	f.delivered = append(f.delivered, m.ID)
	return nil
}

// A message committed with its state change is delivered once the handler works again: five
// failures, each rescheduled with backoff on the fake clock, then exactly one delivery, and the
// message is gone.
func TestFailedDeliveriesRetryUntilDone(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	h := &flaky{fail: 5}
	r := &Relay{Store: s, Handlers: map[string]Handler{"start": h.handle}, Now: c.Now,
		Rand: rand.New(rand.NewPCG(1, 2)), Log: slog.New(slog.DiscardHandler)}
	w, err := New("start", "recovery#pay_1#r1", map[string]string{"payment_id": "pay_1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	state := store.Write{Table: "payments", Put: &store.Item{PK: "pay_1", Doc: []byte(`{}`)}}
	if err := s.Transact(ctx, state, w); err != nil {
		t.Fatal(err)
	}
	for i := 0; len(h.delivered) == 0; i++ {
		if i > 100 {
			t.Fatal("never delivered")
		}
		if _, _, err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute) // past the longest backoff
	}
	if h.failures != 5 || fmt.Sprint(h.delivered) != "[recovery#pay_1#r1]" {
		t.Fatalf("%d failures, delivered %v", h.failures, h.delivered)
	}
	if _, err := s.Get(ctx, Table, "recovery#pay_1#r1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered message still in the outbox: %v", err)
	}
	if d, f, _ := r.Drain(ctx); d+f != 0 {
		t.Fatalf("drained again: %d delivered, %d failed", d, f)
	}
}

// A failed delivery waits its backoff: draining before it is due delivers nothing.
func TestBackoffIsHonoured(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	h := &flaky{fail: 1}
	r := &Relay{Store: s, Handlers: map[string]Handler{"k": h.handle}, Now: c.Now, Base: time.Second, Cap: time.Second,
		Rand: rand.New(rand.NewPCG(3, 4)), Log: slog.New(slog.DiscardHandler)}
	w, _ := New("k", "m1", nil, t0)
	if err := s.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	if d, f, _ := r.Drain(ctx); d != 0 || f != 1 {
		t.Fatalf("first drain: %d, %d", d, f)
	}
	it, err := s.Get(ctx, Table, "m1", "")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Decode(it)
	if m.Attempts != 1 || m.LastError == "" {
		t.Fatalf("after a failure: %+v", m)
	}
	c.Advance(time.Second + time.Millisecond)
	if d, _, _ := r.Drain(ctx); d != 1 {
		t.Fatalf("after the backoff: %d delivered", d)
	}
}

// A message of a kind nobody handles stays (it is never dropped), and a new write of a
// delivered id is delivered again rather than lost to the earlier delete.
func TestNothingIsDropped(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	h := &flaky{}
	r := &Relay{Store: s, Handlers: map[string]Handler{"k": h.handle}, Now: c.Now, Log: slog.New(slog.DiscardHandler)}
	unknown, _ := New("other", "x1", nil, t0)
	known, _ := New("k", "m1", nil, t0)
	if err := s.Transact(ctx, unknown, known); err != nil {
		t.Fatal(err)
	}
	if d, f, _ := r.Drain(ctx); d != 1 || f != 1 {
		t.Fatalf("drain: %d delivered, %d failed", d, f)
	}
	if _, err := s.Get(ctx, Table, "x1", ""); err != nil {
		t.Fatalf("a message without a handler was dropped: %v", err)
	}
	c.Advance(time.Second)
	again, _ := New("k", "m1", nil, c.Now())
	if err := s.Transact(ctx, again); err != nil {
		t.Fatal(err)
	}
	if d, _, _ := r.Drain(ctx); d != 1 || len(h.delivered) != 2 {
		t.Fatalf("rewritten message: %d delivered, %v", d, h.delivered)
	}
	if _, err := New("", "id", nil, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("kindless message: %v", err)
	}
}

// More messages than a page of each shard, spread over the shards of Due: one drain delivers
// every one, oldest due first across the shards, and leaves none.
func TestDrainWalksEveryShardInDueOrder(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0.Add(time.Hour))
	h := &flaky{}
	r := &Relay{Store: s, Handlers: map[string]Handler{"k": h.handle}, Now: c.Now, Log: slog.New(slog.DiscardHandler)}
	drainPage = 10
	t.Cleanup(func() { drainPage = 100 })
	const n = 1409 // over a page in most shards
	var want []string
	var batch []store.Write
	shards := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("m%04d", (i*7919)%n) // ids not in due order
		w, err := New("k", id, nil, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		shards[w.Put.IndexPK]++
		want = append(want, id)
		if batch = append(batch, w); len(batch) == 100 || i == n-1 {
			if err := s.Transact(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	full := 0
	for _, k := range shards {
		if k > drainPage {
			full++
		}
	}
	if len(shards) != Due.N || full < 2 {
		t.Fatalf("messages in %d shards (%d over a page), want all %d", len(shards), full, Due.N)
	}
	if due, err := Undelivered(ctx, s, 0); err != nil || len(due) != n {
		t.Fatalf("%d undelivered (%v), want %d", len(due), err, n)
	}
	if d, f, err := r.Drain(ctx); d != n || f != 0 || err != nil {
		t.Fatalf("drain: %d delivered, %d failed, %v", d, f, err)
	}
	if fmt.Sprint(h.delivered) != fmt.Sprint(want) {
		t.Fatalf("delivered out of due order:\n%v\nwant\n%v", h.delivered[:10], want[:10])
	}
	if due, _ := Undelivered(ctx, s, 0); len(due) != 0 {
		t.Fatalf("%d left", len(due))
	}
}

// BenchmarkDrainEmpty is what the local relay pays every interval when nothing is due: a
// query of each shard of Due.
func BenchmarkDrainEmpty(b *testing.B) {
	s := newStore(b)
	r := &Relay{Store: s, Handlers: map[string]Handler{}, Log: slog.New(slog.DiscardHandler)}
	for b.Loop() {
		if _, _, err := r.Drain(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// A timer (NewAt) is delivered when the relay's clock reaches its moment, not before, by a
// relay with and without MinAge (a sweep takes a timer at once when due: the stream left it);
// writing its id again due now brings it forward.
func TestTimerIsDeliveredWhenDue(t *testing.T) {
	for name, minAge := range map[string]time.Duration{"local relay": 0, "sweep behind a stream": 10 * time.Minute} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			c := clock.NewFake(t0)
			h := &flaky{}
			r := &Relay{Store: s, Handlers: map[string]Handler{"k": h.handle}, Now: c.Now, MinAge: minAge, Log: slog.New(slog.DiscardHandler)}
			due := t0.Add(3 * 24 * time.Hour)
			w, err := NewAt("k", "timer", nil, due, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Transact(ctx, w); err != nil {
				t.Fatal(err)
			}
			it, _ := s.Get(ctx, Table, "timer", "")
			if m, _ := Decode(it); !m.Waiting(t0) || !m.DueAt.Equal(due) {
				t.Fatalf("stored timer %+v: want waiting until %s", m, due)
			}
			c.Advance(due.Add(-time.Nanosecond).Sub(c.Now()))
			if d, f, _ := r.Drain(ctx); d+f != 0 {
				t.Fatalf("drained before the moment: %d delivered, %d failed", d, f)
			}
			c.Advance(due.Sub(c.Now()))
			if d, _, _ := r.Drain(ctx); d != 1 || fmt.Sprint(h.delivered) != "[timer]" {
				t.Fatalf("at the moment: %d delivered, %v", d, h.delivered)
			}

			// Brought forward: the same id written again due now.
			w, _ = NewAt("k", "later", nil, due.Add(time.Hour), due)
			if err := s.Transact(ctx, w); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Minute)
			forward, _ := NewAt("k", "later", nil, c.Now(), c.Now())
			if err := s.Transact(ctx, forward); err != nil {
				t.Fatal(err)
			}
			c.Advance(minAge)
			if d, _, _ := r.Drain(ctx); d != 1 || fmt.Sprint(h.delivered) != "[timer later]" {
				t.Fatalf("brought forward: %d delivered, %v", d, h.delivered)
			}
		})
	}
}

// A sweep with MinAge leaves a message the stream saw when it was due (written at its due
// time) until it is MinAge old, but takes a timer that fell due meanwhile at once.
func TestSweepTakesTimersAtOnceAndLeavesStreamMessages(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	h := &flaky{}
	r := &Relay{Store: s, Handlers: map[string]Handler{"k": h.handle}, Now: c.Now, MinAge: 10 * time.Minute, Log: slog.New(slog.DiscardHandler)}
	timer, _ := NewAt("k", "timer", nil, t0.Add(time.Minute), t0)
	now, _ := New("k", "now", nil, t0.Add(time.Minute))
	if err := s.Transact(ctx, timer, now); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	if d, _, _ := r.Drain(ctx); d != 1 || fmt.Sprint(h.delivered) != "[timer]" {
		t.Fatalf("first sweep: %d delivered, %v; want the timer alone", d, h.delivered)
	}
	c.Advance(10 * time.Minute)
	if d, _, _ := r.Drain(ctx); d != 1 || fmt.Sprint(h.delivered) != "[timer now]" {
		t.Fatalf("sweep after MinAge: %d delivered, %v", d, h.delivered)
	}
}

// Drain with lanes: one payment's changes are delivered one at a time in the order they were
// due, while other payments' messages are delivered beside them. Each handler of the first
// message of pay_a waits until a message of another payment is being delivered at the same
// time, which one lane never does.
func TestLanesKeepEachKeysOrder(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	var mu sync.Mutex
	got := map[string][]string{} // order key -> ids in delivery order
	inFlight := map[string]int{} // order key -> deliveries running now
	otherStarted := make(chan struct{})
	var once sync.Once
	handle := func(ctx context.Context, m Message) error {
		key := OrderKey(m.ID)
		mu.Lock()
		inFlight[key]++
		if inFlight[key] > 1 {
			mu.Unlock()
			return fmt.Errorf("%s: two deliveries of one key at once", m.ID)
		}
		got[key] = append(got[key], m.ID)
		mu.Unlock()
		if key != "change#pay_a" {
			once.Do(func() { close(otherStarted) })
		} else if m.ID == "change#pay_a#001" {
			select {
			case <-otherStarted:
			case <-time.After(10 * time.Second):
				return errors.New("no other payment's message was delivered beside pay_a's")
			}
		}
		mu.Lock()
		inFlight[key]--
		mu.Unlock()
		return nil
	}
	r := &Relay{Store: s, Handlers: map[string]Handler{"change": handle}, Now: c.Now, Lanes: 8,
		Rand: rand.New(rand.NewPCG(1, 2)), Log: slog.New(slog.DiscardHandler)}
	var want []string
	for i := 1; i <= 30; i++ { // due one after another, pay_a's interleaved with nine others
		for _, p := range []string{"pay_a", fmt.Sprintf("pay_%d", i%9)} {
			id := fmt.Sprintf("change#%s#%03d", p, i)
			w, err := New("change", id, map[string]int{"n": i}, c.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Transact(ctx, w); err != nil {
				t.Fatal(err)
			}
			if p == "pay_a" {
				want = append(want, id)
			}
			c.Advance(time.Millisecond) // pay_a's first message is the first due
		}
	}
	delivered, failed, err := r.Drain(ctx)
	if err != nil || delivered != 60 || failed != 0 {
		t.Fatalf("delivered %d, failed %d, err %v", delivered, failed, err)
	}
	if fmt.Sprint(got["change#pay_a"]) != fmt.Sprint(want) {
		t.Fatalf("pay_a's changes delivered as %v, want %v", got["change#pay_a"], want)
	}
	for key, ids := range got {
		if !slices.IsSorted(ids) {
			t.Errorf("%s delivered out of order: %v", key, ids)
		}
	}
	if left, err := Undelivered(ctx, s, 0); err != nil || len(left) != 0 {
		t.Fatalf("left: %d (%v)", len(left), err)
	}
}

func TestOrderKey(t *testing.T) {
	for id, want := range map[string]string{
		"change#pay_1#00000000000000000007": "change#pay_1",
		"recovery#pay_1#r1":                 "recovery#pay_1",
		"plain":                             "plain",
		"#leading":                          "#leading",
	} {
		if got := OrderKey(id); got != want {
			t.Errorf("OrderKey(%q) = %q, want %q", id, got, want)
		}
	}
}

// levels records the level of every log line.
type levels struct {
	mu  sync.Mutex
	got []slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r.Level)
	return nil
}

// A delivery cut short by the relay's own context (a shutdown, a Lambda deadline) is not a
// failure: the message stays due exactly as it was, with no attempt counted and no warning or
// error logged, and the next drain delivers it.
func TestStoppedDeliveryLeavesTheMessageAsItWas(t *testing.T) {
	s := newStore(t)
	c := clock.NewFake(t0)
	ctx, stop := context.WithCancel(context.Background())
	var delivered []string
	handle := func(hctx context.Context, m Message) error {
		if ctx.Err() == nil {
			stop() // the process is told to stop while the call is in flight
			<-hctx.Done()
			return fmt.Errorf("publish %s: %w", m.ID, hctx.Err())
		}
		delivered = append(delivered, m.ID)
		return nil
	}
	logs := &levels{}
	r := &Relay{Store: s, Handlers: map[string]Handler{"k": handle}, Now: c.Now,
		Rand: rand.New(rand.NewPCG(5, 6)), Log: slog.New(logs)}
	w, _ := New("k", "m1", nil, t0)
	if err := s.Transact(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	before, err := s.Get(context.Background(), Table, "m1", "")
	if err != nil {
		t.Fatal(err)
	}
	if d, f, _ := r.Drain(ctx); d != 0 || f != 1 {
		t.Fatalf("stopped drain: %d delivered, %d failed", d, f)
	}
	after, err := s.Get(context.Background(), Table, "m1", "")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || after.IndexSK != before.IndexSK || string(after.Doc) != string(before.Doc) {
		t.Fatalf("a stopped delivery changed the message:\nbefore %+v\nafter  %+v", before, after)
	}
	for _, l := range logs.got {
		if l >= slog.LevelWarn {
			t.Fatalf("a stopped delivery logged at %v: %v", l, logs.got)
		}
	}
	if d, _, _ := r.Drain(context.Background()); d != 1 || fmt.Sprint(delivered) != "[m1]" {
		t.Fatalf("next drain: %d delivered, %v", d, delivered)
	}
}
