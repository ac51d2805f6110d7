package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// relayStores are the stores the relayed retry runs on: the local one and DynamoDB Local.
var relayStores = testenv.Stores(deadletter.Table, outbox.Table)

// relayEnv is operator-api's table (with no Requeuer) and outbox-relay's (with the Requeuer), on one store, with the relay that delivers the retries.
type relayEnv struct {
	store   store.Store
	ops     *deadletter.Records
	relayed *deadletter.Records
	relay   *outbox.Relay
	clock   *clock
	sent    *sent
}

func newRelayEnv(t *testing.T, newStore func(t *testing.T) store.Store) relayEnv {
	t.Helper()
	s := newStore(t)
	c := &clock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	q := &sent{}
	quiet := slog.New(slog.DiscardHandler)
	e := relayEnv{store: s, clock: c, sent: q,
		ops:     &deadletter.Records{Store: s, Now: c.Now, Log: quiet},
		relayed: &deadletter.Records{Store: s, Requeuer: q, Now: c.Now, Log: quiet}}
	e.relay = &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{deadletter.KindRetry: e.relayed.RetryFollowOn()},
		Now: c.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: quiet}
	return e
}

// message reads the outbox message of the record's retry n.
func (e relayEnv) message(t *testing.T, recordID string, n int) (outbox.Message, bool) {
	t.Helper()
	it, err := e.store.Get(context.Background(), outbox.Table, deadletter.RetryMessageID(deadletter.RetryID(recordID, n)), "")
	if errors.Is(err, store.ErrNotFound) {
		return outbox.Message{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := outbox.Decode(it)
	if err != nil {
		t.Fatal(err)
	}
	return m, true
}

func (e relayEnv) drain(t *testing.T) (int, int) {
	t.Helper()
	d, f, err := e.relay.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d, f
}

// A relayed retry commits its outbox message with the record's move to retrying and sends
// nothing itself: a crash right after the commit loses nothing, because the message is in
// the outbox. The relay sends it once, with the retry id; delivering it again (the relay died
// before its delete) sends nothing more, and neither does a delivery after the retry ended.
func TestRelayedRetryIsCommittedWithTheRecord(t *testing.T) {
	for name, newStore := range relayStores {
		t.Run(name, func(t *testing.T) {
			e := newRelayEnv(t, newStore)
			ctx := context.Background()
			r, _, err := e.ops.Open(ctx, webhookRecord("evt_relay_"+name))
			if err != nil {
				t.Fatal(err)
			}
			// A double click: one retry, one message.
			var wg sync.WaitGroup
			var mu sync.Mutex
			retried := 0
			for range 4 {
				wg.Go(func() {
					_, ok, err := e.ops.Retry(ctx, r.ID, "alice", "")
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					if ok {
						retried++
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			got, err := e.ops.Get(ctx, r.ID)
			if err != nil || retried != 1 || got.Status != deadletter.StatusRetrying || got.Retries != 1 {
				t.Fatalf("after the clicks: %d retried, %s with %d retries (%v)", retried, got.Status, got.Retries, err)
			}
			// The "crash": nothing runs after the commit. The message is there, nothing was sent.
			m, ok := e.message(t, r.ID, 1)
			if !ok || m.Kind != deadletter.KindRetry || e.sent.count() != 0 {
				t.Fatalf("outbox message %+v (found %v), %d sent before the relay ran", m, ok, e.sent.count())
			}
			due, err := outbox.Undelivered(ctx, e.store, 10)
			if err != nil || len(due) != 1 {
				t.Fatalf("%d messages due, want the one retry (%v)", len(due), err)
			}
			// The relay (after the restart) sends it, with the retry id, and marks it done.
			if d, f := e.drain(t); d != 1 || f != 0 {
				t.Fatalf("drain: %d delivered, %d failed", d, f)
			}
			if e.sent.count() != 1 || e.sent.ids[0] != deadletter.RetryID(r.ID, 1) {
				t.Fatalf("sent %v, want [%s]", e.sent.ids, deadletter.RetryID(r.ID, 1))
			}
			if _, ok := e.message(t, r.ID, 1); ok {
				t.Fatal("the delivered message is still in the outbox")
			}
			// Delivered again (the relay died between the send and the delete): nothing more.
			if err := e.relay.Deliver(ctx, m, 0); err != nil || e.sent.count() != 1 {
				t.Fatalf("second delivery: %v, %d sent", err, e.sent.count())
			}
			// The consumer ends the retry; a late delivery still sends nothing.
			if _, ok, err := e.ops.RetrySucceeded(ctx, r.ID, deadletter.RetryID(r.ID, 1), "applied"); err != nil || !ok {
				t.Fatalf("retry succeeded: %v %v", ok, err)
			}
			if err := e.relay.Deliver(ctx, m, 0); err != nil || e.sent.count() != 1 {
				t.Fatalf("delivery after the end: %v, %d sent", err, e.sent.count())
			}
			if got, _ := e.ops.Get(ctx, r.ID); got.Status != deadletter.StatusResolved {
				t.Fatalf("record %s, want resolved", got.Status)
			}
		})
	}
}

// A relayed retry that cannot be sent closes its loop: a target that refuses it for good
// returns the record to its previous status at the first attempt; a failing one is tried
// again with backoff, and after RelayAttempts attempts the record goes back too. Either way
// the audit has the retry_failed entry, the message is done, and the operator can retry
// again.
func TestRelayedRetryThatCannotBeSentGoesBack(t *testing.T) {
	cases := map[string]struct {
		fail     error
		from     deadletter.Status
		attempts int
	}{
		"target refuses for good": {fail: fmt.Errorf("%w: no queue", deadletter.ErrNotRetryable), from: deadletter.StatusOpen, attempts: 1},
		"queue down":              {fail: errors.New("queue down"), from: deadletter.StatusOpen, attempts: deadletter.RelayAttempts},
		"ignored record, refused": {fail: deadletter.ErrNotRetryable, from: deadletter.StatusIgnored, attempts: 1},
	}
	for name, newStore := range relayStores {
		for cname, tc := range cases {
			t.Run(name+"/"+cname, func(t *testing.T) {
				e := newRelayEnv(t, newStore)
				ctx := context.Background()
				r, _, err := e.ops.Open(ctx, webhookRecord("evt_unsent"))
				if err != nil {
					t.Fatal(err)
				}
				if tc.from == deadletter.StatusIgnored {
					if _, err := e.ops.Ignore(ctx, r.ID, "alice", "later"); err != nil {
						t.Fatal(err)
					}
				}
				if _, ok, err := e.ops.Retry(ctx, r.ID, "alice", ""); err != nil || !ok {
					t.Fatalf("retry: %v %v", ok, err)
				}
				e.sent.fail = tc.fail
				for i := 1; i <= tc.attempts; i++ {
					d, f := e.drain(t)
					got, _ := e.ops.Get(ctx, r.ID)
					if i < tc.attempts {
						// Not yet: the record stays retrying, the message is due again later.
						m, ok := e.message(t, r.ID, 1)
						if f != 1 || got.Status != deadletter.StatusRetrying || !ok || m.Attempts != i {
							t.Fatalf("attempt %d: %d failed, %s, message %+v", i, f, got.Status, m)
						}
						e.clock.Add(time.Minute) // past the backoff's cap
						continue
					}
					if d != 1 {
						t.Fatalf("attempt %d: %d delivered, %d failed; want the message done", i, d, f)
					}
				}
				got, err := e.ops.Get(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				last := got.Audit[len(got.Audit)-1]
				if got.Status != tc.from || last.Action != deadletter.ActionRetryError || last.To != tc.from ||
					last.RetryID != deadletter.RetryID(r.ID, 1) {
					t.Fatalf("record %s, last audit %+v; want back to %s with retry_failed", got.Status, last, tc.from)
				}
				if _, ok := e.message(t, r.ID, 1); ok {
					t.Fatal("the message is still in the outbox")
				}
				if n, _ := e.ops.OpenCount(ctx); (n == 1) != (tc.from == deadletter.StatusOpen) {
					t.Fatalf("open count %d", n)
				}
				// The operator retries again: retry 2, its own message.
				e.sent.fail = nil
				if _, ok, err := e.ops.Retry(ctx, r.ID, "alice", "again"); err != nil || !ok {
					t.Fatalf("second retry: %v %v", ok, err)
				}
				if d, _ := e.drain(t); d != 1 || e.sent.count() != 1 || e.sent.ids[0] != deadletter.RetryID(r.ID, 2) {
					t.Fatalf("second retry: %d delivered, sent %v", d, e.sent.ids)
				}
			})
		}
	}
}

// The relay's table without a Requeuer keeps the message (an error, retried): a wiring
// mistake never drops a retry.
func TestRetryFollowOnWithoutRequeuerKeepsTheMessage(t *testing.T) {
	e := newRelayEnv(t, relayStores["bbolt"])
	ctx := context.Background()
	r, _, _ := e.ops.Open(ctx, webhookRecord("evt_norequeuer"))
	if _, ok, err := e.ops.Retry(ctx, r.ID, "alice", ""); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	m, _ := e.message(t, r.ID, 1)
	err := (&deadletter.Records{Store: e.store, Now: e.clock.Now}).RetryFollowOn()(ctx, m)
	if !errors.Is(err, deadletter.ErrRequeue) {
		t.Fatalf("err %v, want ErrRequeue", err)
	}
	if got, _ := e.ops.Get(ctx, r.ID); got.Status != deadletter.StatusRetrying {
		t.Fatalf("record %s", got.Status)
	}
}
