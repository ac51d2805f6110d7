package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/store"
)

// fakeClock is a settable clock shared by a test's keepers.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// storeMakers lists every store the lifecycle runs on. The DynamoDB store joins it in
// dynamo_test.go when a DynamoDB-API server is available.
var storeMakers = map[string]func(t testing.TB) store.Store{
	"bolt": func(t testing.TB) store.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "idem.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
}

func forEachStore(t *testing.T, fn func(t *testing.T, s store.Store)) {
	for name, mk := range storeMakers {
		t.Run(name, func(t *testing.T) { fn(t, mk(t)) })
	}
}

func newKeeper(t testing.TB, s store.Store, c *fakeClock) *Keeper {
	k, err := NewKeeper(Keeper{Store: s, Now: c.Now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var quiet = slog.New(slog.DiscardHandler)

func fp(t testing.TB, body string) Fingerprint {
	f, err := FingerprintJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRetentionMustOutlastRetryWindow(t *testing.T) {
	cases := map[string]struct {
		cfg  Keeper
		want error
	}{
		"defaults":           {Keeper{}, nil},
		"equal":              {Keeper{Retention: 72 * time.Hour, RetryWindow: 72 * time.Hour}, ErrRetention},
		"shorter":            {Keeper{Retention: 24 * time.Hour}, ErrRetention},
		"longer":             {Keeper{Retention: 4 * 24 * time.Hour}, nil},
		"custom window long": {Keeper{Retention: 10 * 24 * time.Hour, RetryWindow: 9 * 24 * time.Hour}, nil},
	}
	for name, tc := range cases {
		_, err := NewKeeper(tc.cfg)
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func TestLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		k := newKeeper(t, s, clock)
		req := fp(t, `{"amount":100}`)

		out, err := k.Acquire(ctx, "local", "key-1", req)
		if err != nil || out.Kind != New {
			t.Fatalf("first acquire: %v %v", out.Kind, err)
		}
		// While in progress: 409-style outcome, and a different body is a mismatch.
		if dup, _ := k.Acquire(ctx, "local", "key-1", req); dup.Kind != InProgress || dup.RetryAfter < time.Second || dup.RetryAfter > 2*time.Second ||
			!dup.LockExpiresAt.Equal(clock.Now().Add(30*time.Second)) {
			t.Fatalf("in progress: %+v", dup)
		}
		if look, _ := k.Lookup(ctx, "local", "key-1"); look.Kind != InProgress || !look.LockExpiresAt.Equal(clock.Now().Add(30*time.Second)) {
			t.Fatalf("looked up in progress: %+v", look)
		}
		if mm, _ := k.Acquire(ctx, "local", "key-1", fp(t, `{"amount":200}`)); mm.Kind != Mismatch || fmt.Sprint(mm.Fields) != "[amount]" {
			t.Fatalf("mismatch: %+v", mm)
		}
		// Another scope never collides.
		if other, _ := k.Acquire(ctx, "tenant-b", "key-1", req); other.Kind != New {
			t.Fatalf("other scope: %v", other.Kind)
		}
		// Complete with an effect: both land.
		effect := store.Write{Table: "payments", Put: &store.Item{PK: "pay_1", Doc: []byte(`{"amount":100}`)}, Cond: store.Cond{Kind: store.NotExists}}
		resp := Response{Status: 201, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"id":"pay_1"}`)}
		if err := k.Complete(ctx, out.Lease, resp, effect); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "payments", "pay_1", ""); err != nil {
			t.Fatalf("effect missing: %v", err)
		}
		rep, err := k.Acquire(ctx, "local", "key-1", req)
		if err != nil || rep.Kind != Replay || rep.Response.Status != 201 || string(rep.Response.Body) != `{"id":"pay_1"}` {
			t.Fatalf("replay: %+v %v", rep, err)
		}
		// Completing twice is refused: the lease's effects commit once.
		if err := k.Complete(ctx, out.Lease, resp, effect); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("second complete of the same lease: %v", err)
		}
		// After retention the key may be used afresh.
		clock.Advance(7*24*time.Hour + time.Second)
		if again, _ := k.Acquire(ctx, "local", "key-1", req); again.Kind != New {
			t.Fatalf("after retention: %v", again.Kind)
		}
	})
}

func TestCompleteCommitsWithEffectOrNotAtAll(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		out, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`))
		// The effect's condition fails (the payment exists): the key must not complete.
		if err := s.Put(ctx, "payments", store.Item{PK: "pay_x", Doc: []byte(`{}`)}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(`{}`)},
			store.Write{Table: "payments", Put: &store.Item{PK: "pay_x", Doc: []byte(`{"new":1}`)}, Cond: store.Cond{Kind: store.NotExists}})
		var ce *store.ConditionError
		if !errors.As(err, &ce) || ce.Index != 0 {
			t.Fatalf("got %v, want effect condition error at index 0", err)
		}
		if dup, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`)); dup.Kind != InProgress {
			t.Fatalf("key completed although its effect did not: %v", dup.Kind)
		}
	})
}

func TestReleaseLetsTheNextRequestRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		out, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`))
		pending := store.Write{Table: "payments", Put: &store.Item{PK: "pay_p", Doc: []byte(`{"status":"pending"}`)}}
		if err := k.Release(ctx, out.Lease, pending); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "payments", "pay_p", ""); err != nil {
			t.Fatalf("release did not commit its effect: %v", err)
		}
		if again, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`)); again.Kind != New {
			t.Fatalf("after release: %v", again.Kind)
		}
	})
}

func TestTakeoverFencesTheOldHolder(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := newClock()
		k := newKeeper(t, s, clock)
		first, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`))
		clock.Advance(31 * time.Second) // past the default 30 s lock
		second, err := k.Acquire(ctx, "local", "k", fp(t, `{}`))
		if err != nil || second.Kind != New || !second.TakenOver || first.TakenOver {
			t.Fatalf("takeover: %v %v (taken over: first %v, second %v)", second.Kind, err, first.TakenOver, second.TakenOver)
		}
		effect := func(id string) store.Write {
			return store.Write{Table: "payments", Put: &store.Item{PK: id, Doc: []byte(`{}`)}}
		}
		if err := k.Complete(ctx, first.Lease, Response{Status: 201, Body: []byte(`"first"`)}, effect("pay_first")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("old holder completed: %v", err)
		}
		if _, err := s.Get(ctx, "payments", "pay_first", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("the fenced-off holder's effect was committed")
		}
		if err := k.Complete(ctx, second.Lease, Response{Status: 201, Body: []byte(`"second"`)}, effect("pay_second")); err != nil {
			t.Fatal(err)
		}
		rep, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`))
		if rep.Kind != Replay || string(rep.Response.Body) != `"second"` {
			t.Fatalf("replay %+v", rep)
		}
	})
}

func TestLockFollowsTheContextDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		// The deadline is a real context's (wall time); the Keeper's clock is a fake far from
		// it, as a local stack's settable start is: the lock lasts what is left of the deadline.
		clock := newClock()
		k := newKeeper(t, s, clock)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, _ := k.Acquire(ctx, "local", "k", fp(t, `{}`)); out.Kind != New {
			t.Fatal(out.Kind)
		}
		clock.Advance(2*time.Minute + 2*time.Second) // inside deadline + 5 s margin
		if out, _ := k.Acquire(context.Background(), "local", "k", fp(t, `{}`)); out.Kind != InProgress {
			t.Fatalf("lock expired before deadline + margin: %v", out.Kind)
		}
		clock.Advance(4 * time.Second)
		if out, _ := k.Acquire(context.Background(), "local", "k", fp(t, `{}`)); out.Kind != New {
			t.Fatalf("lock outlived deadline + margin: %v", out.Kind)
		}
	})
}

// TestTakeoverKeepsTheFirstTry: a holder that died may have done the work (a charge sent under
// the provider key), so whoever takes its lock over learns when the key was first tried, and
// hands it on if it dies too; another body is refused, and the holder's record stays.
func TestTakeoverKeepsTheFirstTry(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		clock := newClock()
		t0 := clock.Now()
		k := newKeeper(t, s, clock)
		body := fp(t, `{"amount":1}`)
		if out, err := k.Acquire(context.Background(), "local", "k", body); err != nil || out.Kind != New || !out.Lease.FirstTried.Equal(t0) {
			t.Fatalf("first: %+v %v", out, err)
		}
		// The holder dies. Past its lock, another body is not let in, and the record stays.
		clock.Advance(time.Hour)
		if out, err := k.Acquire(context.Background(), "local", "k", fp(t, `{"amount":2}`)); err != nil || out.Kind != Mismatch {
			t.Fatalf("another body: %+v %v", out, err)
		}
		for i := range 2 { // a taker that dies in turn hands the first try on
			out, err := k.Acquire(context.Background(), "local", "k", body)
			if err != nil || out.Kind != New || !out.TakenOver || !out.Lease.FirstTried.Equal(t0) {
				t.Fatalf("takeover %d: %+v %v, want first tried at %s", i+1, out, err, t0)
			}
			clock.Advance(time.Hour)
		}
	})
}

func TestFiftyConcurrentAcquiresOneWinner(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		k := newKeeper(t, s, newClock())
		var wg sync.WaitGroup
		var mu sync.Mutex
		kinds := map[Kind]int{}
		for range 50 {
			wg.Go(func() {
				out, err := k.Acquire(context.Background(), "local", "race", fp(t, `{"a":1}`))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				kinds[out.Kind]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if kinds[New] != 1 || kinds[InProgress] != 49 {
			t.Fatalf("outcomes %v, want 1 new and 49 in progress", kinds)
		}
	})
}

func TestDo(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		runs := 0
		op := func(final bool, fail error) func(context.Context) (Result, error) {
			return func(context.Context) (Result, error) {
				runs++
				return Result{Response: Response{Status: 200, Body: []byte(fmt.Sprint(runs))}, Final: final}, fail
			}
		}
		boom := errors.New("boom")
		if _, err := k.Do(ctx, "s", "k", fp(t, `{}`), op(true, boom)); !errors.Is(err, boom) {
			t.Fatalf("op error: %v", err)
		}
		out, err := k.Do(ctx, "s", "k", fp(t, `{}`), op(false, nil)) // unknown outcome: released
		if err != nil || out.Kind != New || string(out.Response.Body) != "2" {
			t.Fatalf("not final: %+v %v", out, err)
		}
		out, _ = k.Do(ctx, "s", "k", fp(t, `{}`), op(true, nil))
		if out.Kind != New || string(out.Response.Body) != "3" {
			t.Fatalf("final: %+v", out)
		}
		out, _ = k.Do(ctx, "s", "k", fp(t, `{}`), op(true, nil))
		if out.Kind != Replay || string(out.Response.Body) != "3" || runs != 3 {
			t.Fatalf("replay ran op again: runs=%d %+v", runs, out)
		}
	})
}

// An IfNewer group (a payment's put and the message that announces it) that loses to a newer
// version is dropped whole; the response and the plain effects commit without it.
func TestIfNewerGroupYieldsToNewerVersionsWhole(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		// A webhook already stored version 10 of the payment.
		if err := s.Put(ctx, "payments", store.Item{PK: "pay_w", Doc: []byte(`"refunded"`), Version: 10}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		out, err := k.Do(ctx, "s", "k", fp(t, `{}`), func(context.Context) (Result, error) {
			return Result{Response: Response{Status: 201, Body: []byte(`{}`)}, Final: true,
				Effects: []store.Write{versioned("other", 1)},
				IfNewer: []store.Write{versioned("pay_w", 9), versioned("change#pay_w#9", 0)}}, nil
		})
		if err != nil || out.Kind != New {
			t.Fatalf("%v %v", out.Kind, err)
		}
		if it, _ := s.Get(ctx, "payments", "pay_w", ""); string(it.Doc) != `"refunded"` || it.Version != 10 {
			t.Fatalf("older write replaced a newer version: %s v%d", it.Doc, it.Version)
		}
		if _, err := s.Get(ctx, "payments", "change#pay_w#9", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the message of a dropped write committed: %v", err)
		}
		if _, err := s.Get(ctx, "payments", "other", ""); err != nil {
			t.Fatalf("the plain effect was dropped too: %v", err)
		}
		if rep, _ := k.Acquire(ctx, "s", "k", fp(t, `{}`)); rep.Kind != Replay {
			t.Fatalf("response not stored: %v", rep.Kind)
		}
	})
}

// A lost group is read again through Refresh, which sees what is stored now; Refresh is asked
// at most refreshTries-1 times, and the group is dropped after that.
func TestIfNewerGroupRefreshes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		if err := s.Put(ctx, "payments", store.Item{PK: "pay_r", Doc: []byte(`"event"`), Version: 10}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		refreshed := 0
		out, err := k.Do(ctx, "s", "k", fp(t, `{}`), func(context.Context) (Result, error) {
			return Result{Response: Response{Status: 201, Body: []byte(`{}`)}, Final: true,
				IfNewer: []store.Write{versioned("pay_r", 9)},
				Refresh: func(ctx context.Context) ([]store.Write, error) {
					refreshed++
					it, err := s.Get(ctx, "payments", "pay_r", "")
					if err != nil {
						return nil, err
					}
					return []store.Write{versioned("pay_r", it.Version+1)}, nil
				}}, nil
		})
		if err != nil || out.Kind != New || refreshed != 1 {
			t.Fatalf("%v %v, refreshed %d times", out.Kind, err, refreshed)
		}
		if it, _ := s.Get(ctx, "payments", "pay_r", ""); it.Version != 11 {
			t.Fatalf("the refreshed write did not commit: v%d", it.Version)
		}

		refreshed = 0
		out, err = k.Do(ctx, "s", "k2", fp(t, `{}`), func(context.Context) (Result, error) {
			return Result{Response: Response{Status: 201, Body: []byte(`{}`)}, Final: true,
				IfNewer: []store.Write{versioned("pay_r", 5)},
				Refresh: func(context.Context) ([]store.Write, error) {
					refreshed++
					return []store.Write{versioned("pay_r", 5)}, nil // always loses
				}}, nil
		})
		if err != nil || out.Kind != New || refreshed != refreshTries-1 {
			t.Fatalf("%v %v, refreshed %d times, want %d", out.Kind, err, refreshed, refreshTries-1)
		}
		if rep, _ := k.Acquire(ctx, "s", "k2", fp(t, `{}`)); rep.Kind != Replay {
			t.Fatalf("response not stored after the group was dropped: %v", rep.Kind)
		}
	})
}

// versioned is a put of item pk at version v, guarded like a payment's write (VersionBelow v).
func versioned(pk string, v int64) store.Write {
	return store.Write{Table: "payments", Put: &store.Item{PK: pk, Doc: []byte(`"answer"`), Version: v},
		Cond: store.Cond{Kind: store.VersionBelow, Version: v}}
}

func TestDoCommitsAfterTheCallersDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		k := newKeeper(t, s, newClock())
		ctx, cancel := context.WithCancel(context.Background())
		out, err := k.Do(ctx, "s", "late", fp(t, `{}`), func(context.Context) (Result, error) {
			cancel() // the caller gave up while the provider answered
			return Result{Response: Response{Status: 201, Body: []byte(`"done"`)}, Final: true}, nil
		})
		if err != nil || out.Kind != New {
			t.Fatalf("%v %v", out.Kind, err)
		}
		if rep, _ := k.Acquire(context.Background(), "s", "late", fp(t, `{}`)); rep.Kind != Replay {
			t.Fatalf("the outcome was not committed: %v", rep.Kind)
		}
	})
}
