package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// applier stands in for payments.Applier: it records every event it is handed, in order, applying
// each the first time (a repeat is a duplicate, as the Applier's dedupe makes it). crashAt, when
// set, ends the calling goroutine (runtime.Goexit) at that call: the process dies mid-page.
type applier struct {
	mu      sync.Mutex
	seen    []string
	applied map[string]int
	crashAt int
	fail    map[string]bool
}

func (a *applier) Apply(_ context.Context, ev webhooks.Event) (payments.Effect, error) {
	a.mu.Lock()
	if a.crashAt > 0 && len(a.seen)+1 == a.crashAt {
		a.crashAt = 0
		a.mu.Unlock()
		runtime.Goexit()
	}
	defer a.mu.Unlock()
	a.seen = append(a.seen, ev.ID)
	if a.fail[ev.ID] {
		return "", errors.New("store unavailable")
	}
	if a.applied == nil {
		a.applied = map[string]int{}
	}
	a.applied[ev.ID]++
	if a.applied[ev.ID] > 1 {
		return payments.Duplicate, nil
	}
	return payments.Applied, nil
}

// body is the smallest Stripe event the decoder takes, for an event of the log.
func body(id string, created time.Time) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"payment_intent.succeeded","created":%d,"data":{"object":{"id":"pi_1","object":"payment_intent"}}}`,
		id, created.Unix()))
}

// backlog is n events, one every 50 ms from start, newest first as the provider lists them.
func backlog(start time.Time, n int) events {
	l := make(events, n)
	for i := range n {
		id, created := fmt.Sprintf("evt_%07d", i), start.Add(time.Duration(i)*50*time.Millisecond).Truncate(time.Second)
		l[n-1-i] = provider.Event{ID: id, Type: "payment_intent.succeeded", Created: created, Body: body(id, created)}
	}
	return l
}

func oldestFirst(l events) []string {
	var ids []string
	for i := len(l) - 1; i >= 0; i-- {
		ids = append(ids, l[i].ID)
	}
	return ids
}

func run(t *testing.T, b *backfill.Backfill) backfill.Report {
	t.Helper()
	rep, err := b.Run(context.Background(), backfill.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// caughtUp runs a first pass over an empty log, so the checkpoint stands at the clock's now.
func caughtUp(t *testing.T, st store.Store, c *clock.Fake) {
	t.Helper()
	if rep := run(t, &backfill.Backfill{Store: st, Events: events{}, Applier: &applier{}, Now: c.Now, Log: quiet}); rep.More || !rep.Checkpoint.Equal(c.Now()) {
		t.Fatalf("first pass over an empty log: %+v", rep)
	}
}

// A backlog larger than one pass (51,000 events behind the checkpoint, 50,000 a pass) is
// walked completely in two passes, oldest first, each event once: the first pass stops at its
// limit with the cursor committed, the second continues after it. With an event before the
// window the walk starts after it (one list call); without one it first finds the window's
// oldest event.
func TestBacklogLargerThanAPassIsWalkedCompletely(t *testing.T) {
	for name, anchored := range map[string]bool{"anchored": true, "no event before the window": false} {
		t.Run(name, func(t *testing.T) {
			st, c, _ := newPass(t)
			caughtUp(t, st, c)
			log := backlog(c.Now().Add(time.Second), 51000)
			if anchored {
				log = append(log, provider.Event{ID: "evt_old", Created: c.Now().Add(-time.Hour), Body: body("evt_old", c.Now().Add(-time.Hour))})
			}
			c.Advance(time.Hour)
			a := &applier{}
			b := &backfill.Backfill{Store: st, Events: log, Applier: a, Now: c.Now, Log: quiet}
			first := run(t, b)
			if !first.More || first.Stopped != "limit" || first.Listed != backfill.MaxEvents || first.Pages != backfill.MaxEvents/backfill.DefaultPageSize {
				t.Fatalf("first pass: more %v stopped %q listed %d pages %d", first.More, first.Stopped, first.Listed, first.Pages)
			}
			if first.BacklogAge <= 0 {
				t.Errorf("first pass reports no backlog age")
			}
			second := run(t, b)
			if second.More || second.Listed != 1000 || !second.Checkpoint.Equal(c.Now()) {
				t.Fatalf("second pass: more %v listed %d checkpoint %v", second.More, second.Listed, second.Checkpoint)
			}
			want := oldestFirst(log)
			if anchored {
				want = want[1:] // the anchor is before the window
			}
			if !slices.Equal(a.seen, want) {
				t.Fatalf("handed %d events, want the %d in order, each once", len(a.seen), len(want))
			}
			if len(first.Applied)+len(second.Applied) != 51000 {
				t.Errorf("applied %d+%d, want 51000", len(first.Applied), len(second.Applied))
			}
		})
	}
}

// A pass whose invocation runs short after k pages commits and stops; the next pass goes on
// at page k+1, and nothing is handed twice or skipped.
func TestDeadlineAfterKPagesContinuesAtTheNextPage(t *testing.T) {
	const k, pages = 3, 8
	st, c, _ := newPass(t)
	caughtUp(t, st, c)
	log := append(backlog(c.Now().Add(time.Second), pages*backfill.DefaultPageSize),
		provider.Event{ID: "evt_old", Created: c.Now().Add(-time.Hour), Body: body("evt_old", c.Now().Add(-time.Hour))})
	c.Advance(time.Hour)
	a := &applier{}
	short := true // the first invocation runs short once k pages are done
	b := &backfill.Backfill{Store: st, Events: log, Applier: a, Now: c.Now, Log: quiet,
		TimeLeft: func(context.Context) (time.Duration, bool) {
			if short && len(a.seen) >= k*backfill.DefaultPageSize {
				return backfill.DefaultReserve - time.Second, true
			}
			return time.Hour, true
		}}
	first := run(t, b)
	if first.Stopped != "deadline" || first.Listed != k*backfill.DefaultPageSize || first.Pages != k {
		t.Fatalf("first pass: stopped %q listed %d pages %d", first.Stopped, first.Listed, first.Pages)
	}
	short = false
	second := run(t, b)
	if second.More || second.Listed != (pages-k)*backfill.DefaultPageSize {
		t.Fatalf("second pass: more %v listed %d", second.More, second.Listed)
	}
	if got, want := a.seen[k*backfill.DefaultPageSize], oldestFirst(log)[1+k*backfill.DefaultPageSize]; got != want {
		t.Errorf("second pass began at %s, want %s (the first of page %d)", got, want, k+1)
	}
	if !slices.Equal(a.seen, oldestFirst(log)[1:]) {
		t.Errorf("events handed out of order, twice or not at all")
	}
}

// A page slower than the reserve (every call of a throttled store backs off): the pass reads
// the time left after every event, so it stops mid-page with the cursor committed at the
// last event it handled, and the next pass begins at the one after. Read once a page, the
// pass would run past its invocation's end, losing the page, and the next pass the same page
// again: a walk that never closes.
func TestDeadlineMidPageCommitsWhereItStops(t *testing.T) {
	const handled = backfill.DefaultPageSize + 37 // time runs short inside the second page
	st, c, _ := newPass(t)
	caughtUp(t, st, c)
	log := backlog(c.Now().Add(time.Second), 3*backfill.DefaultPageSize)
	c.Advance(time.Hour)
	a := &applier{}
	short := true
	b := &backfill.Backfill{Store: st, Events: log, Applier: a, Now: c.Now, Log: quiet,
		TimeLeft: func(context.Context) (time.Duration, bool) {
			if short && len(a.seen) >= handled {
				return time.Second, true
			}
			return time.Hour, true
		}}
	first := run(t, b)
	if !first.More || first.Stopped != "deadline" || first.Listed != handled || first.Pages != 2 {
		t.Fatalf("first pass: more %v stopped %q listed %d pages %d, want a deadline stop after %d events and 2 cursor commits",
			first.More, first.Stopped, first.Listed, first.Pages, handled)
	}
	short = false
	rest := run(t, b)
	if rest.More || rest.Listed != len(log)-handled || !rest.Checkpoint.Equal(c.Now()) {
		t.Fatalf("second pass: more %v listed %d checkpoint %v, want the other %d events and the checkpoint at now",
			rest.More, rest.Listed, rest.Checkpoint, len(log)-handled)
	}
	if got, want := a.seen[handled], oldestFirst(log)[handled]; got != want {
		t.Errorf("second pass began at %s, want %s (the event after the last one handled)", got, want)
	}
	if !slices.Equal(a.seen, oldestFirst(log)) {
		t.Errorf("handed %d events; want the %d in order, each once", len(a.seen), len(log))
	}
}

// A process killed mid-page: the next pass repeats at most that page (the Applier's dedupe
// makes the repeats duplicates) and every event is applied exactly once.
func TestCrashMidPageRepeatsAtMostThatPage(t *testing.T) {
	st, c, _ := newPass(t)
	caughtUp(t, st, c)
	log := backlog(c.Now().Add(time.Second), 5*backfill.DefaultPageSize)
	c.Advance(time.Hour)
	crashAt := 2*backfill.DefaultPageSize + 37
	a := &applier{crashAt: crashAt}
	done := make(chan struct{})
	go func() { // Goexit ends this goroutine mid-pass: no deferred commit runs in the walk
		defer close(done)
		_, _ = (&backfill.Backfill{Store: st, Events: log, Applier: a, Now: c.Now, Log: quiet}).Run(context.Background(), backfill.Request{})
	}()
	<-done
	if len(a.seen) != crashAt-1 {
		t.Fatalf("crashed after %d events, want %d", len(a.seen), crashAt-1)
	}
	rep := run(t, &backfill.Backfill{Store: st, Events: log, Applier: a, Now: c.Now, Log: quiet})
	if rep.More {
		t.Fatalf("the pass after the restart did not finish: %+v", rep)
	}
	if repeats := len(a.seen) - len(log); repeats < 0 || repeats > backfill.DefaultPageSize {
		t.Errorf("%d events handed again after the restart, want at most one page", repeats)
	}
	for _, id := range oldestFirst(log) {
		if a.applied[id] == 0 {
			t.Fatalf("%s never applied", id)
		}
	}
}

// An event that can be neither applied nor put in the outbox stops the pass before it; the
// next pass starts with it.
func TestUnrequeueableEventStopsThePassBeforeIt(t *testing.T) {
	st, c, _ := newPass(t)
	caughtUp(t, st, c)
	log := backlog(c.Now().Add(time.Second), 10)
	c.Advance(time.Hour)
	stuck := oldestFirst(log)[4]
	a := &applier{fail: map[string]bool{stuck: true}}
	down := &failingOutbox{Store: st}
	first := run(t, &backfill.Backfill{Store: down, Events: log, Applier: a, Now: c.Now, Log: quiet})
	if first.Stalled != stuck || !first.More || first.Listed != 4 {
		t.Fatalf("first pass: %+v", first)
	}
	delete(a.fail, stuck)
	second := run(t, &backfill.Backfill{Store: down, Events: log, Applier: a, Now: c.Now, Log: quiet})
	if second.More || second.Listed != 6 || a.seen[5] != stuck {
		t.Fatalf("second pass: %+v, handed %v", second, a.seen)
	}
}

// failingOutbox refuses every outbox write, as a store that is down for that table would.
type failingOutbox struct{ store.Store }

func (f *failingOutbox) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	if table == outbox.Table {
		return errors.New("outbox unavailable")
	}
	return f.Store.Put(ctx, table, it, c)
}

// A checkpoint older than the provider keeps events: the pass walks what is still listed and
// reports the stretch before it as reconciliation-only.
func TestGapOlderThanRetentionIsReconciliationOnly(t *testing.T) {
	st, c, _ := newPass(t)
	caughtUp(t, st, c)
	was := c.Now()
	c.Advance(40 * 24 * time.Hour)
	rep := run(t, &backfill.Backfill{Store: st, Events: events{}, Applier: &applier{}, Now: c.Now, Log: quiet})
	g := rep.ReconciliationOnly
	if g == nil || !g.From.Equal(was) || !g.To.Equal(c.Now().Add(-backfill.DefaultLookback)) || g.Reason == "" {
		t.Fatalf("gap %+v", g)
	}
}

var quiet = slog.New(slog.DiscardHandler)
