package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

var _ sqsbatch.Reporter = (*deadletter.Retries)(nil)

// failures keeps the error of each message the batch reports failed (sqsbatch logs it under
// "error").
type failures struct{ errs *[]error }

func (f failures) Enabled(context.Context, slog.Level) bool { return true }
func (f failures) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f failures) WithGroup(string) slog.Handler            { return f }
func (f failures) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
			*f.errs = append(*f.errs, err)
		}
		return true
	})
	return nil
}

// handle runs m as a consumer's function runs it: next beside h in an sqsbatch.Batch
// (Each: next, Report: h). It returns the message's error: the one that failed the whole
// batch, or the one the message was reported failed with.
func handle(ctx context.Context, h *deadletter.Retries, next sqsbatch.Func, m queue.Message) error {
	var errs []error
	b := &sqsbatch.Batch{Each: next, Report: h, Log: slog.New(failures{&errs})}
	resp, err := b.Handle(ctx, queue.Event("arn:aws:sqs:us-east-1:000000000000:webhooks", "us-east-1", []queue.Message{m}))
	switch {
	case err != nil:
		return err
	case len(resp.BatchItemFailures) == 0:
		return nil
	case len(errs) > 0:
		return errs[len(errs)-1]
	}
	return errors.New("the message failed")
}

// retriedMessage is the message a Requeuer sends for the record's current retry.
func retriedMessage(id string, r deadletter.Record) queue.Message {
	rt := deadletter.RetryID(r.ID, r.Retries)
	return queue.Message{ID: id, Body: r.Target.Body, ReceiveCount: 1,
		Attributes: map[string]string{deadletter.AttrRecordID: r.ID, deadletter.AttrRetryID: rt}}
}

// counting is a consumer's handler that counts the messages it works and fails those in fail.
type counting struct {
	n    atomic.Int64
	fail map[string]bool
}

func (c *counting) Handle(_ context.Context, m queue.Message) error {
	c.n.Add(1)
	if c.fail[m.ID] {
		return errors.New("cannot apply")
	}
	return nil
}

func TestRetriedMessageClosesItsLoop(t *testing.T) {
	tests := map[string]struct {
		fail       bool
		wantStatus deadletter.Status
		wantAudit  string
		attempts   int
	}{
		"the retried work succeeds: resolved":                    {wantStatus: deadletter.StatusResolved, wantAudit: deadletter.ActionRetrySucceeded, attempts: 1},
		"the retried work fails: open with the attempt appended": {fail: true, wantStatus: deadletter.StatusOpen, wantAudit: deadletter.ActionRetryFailedAgain, attempts: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rec, _, err := e.table.Open(ctx, webhookRecord("evt_loop"))
			if err != nil {
				t.Fatal(err)
			}
			// A double click: both go through the table, one retry is sent.
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() { _, _, _ = e.table.Retry(ctx, rec.ID, "ops@example.com", "") })
			}
			wg.Wait()
			e.deliver(t)
			if e.sent.count() != 1 {
				t.Fatalf("double click sent %d retries, want 1", e.sent.count())
			}
			rec, _ = e.table.Get(ctx, rec.ID)
			next := &counting{fail: map[string]bool{"m-retry": tc.fail}}
			h := &deadletter.Retries{Loop: e.table, Now: e.clock.Now, Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
			// The queue delivers the retried message twice (at least once): worked once.
			for range 2 {
				if err := handle(ctx, h, next.Handle, retriedMessage("m-retry", rec)); err != nil {
					t.Fatalf("handle: %v", err)
				}
			}
			if n := next.n.Load(); n != 1 {
				t.Fatalf("the consumer worked the retried message %d times, want 1", n)
			}
			got, err := e.table.Get(ctx, rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			last := got.Audit[len(got.Audit)-1]
			if got.Status != tc.wantStatus || len(got.Tries) != tc.attempts || last.Action != tc.wantAudit ||
				last.RetryID != deadletter.RetryID(rec.ID, 1) {
				t.Fatalf("record %s, %d attempts, last audit %+v", got.Status, len(got.Tries), last)
			}
			if tc.fail && got.Tries[1].MessageID != "m-retry" {
				t.Fatalf("appended attempt %+v", got.Tries[1])
			}
			if !tc.fail && last.Result == "" {
				t.Fatalf("the resolution names no outcome: %+v", last)
			}
			open, _ := e.table.OpenCount(ctx)
			if want := map[bool]int64{true: 1, false: 0}[tc.fail]; open != want {
				t.Fatalf("open count %d, want %d", open, want)
			}
			// A failed retry can be retried again, under the next id.
			if tc.fail {
				if _, ok, err := e.table.Retry(ctx, rec.ID, "ops@example.com", ""); err != nil || !ok {
					t.Fatalf("second retry: %v %v", ok, err)
				}
			}
		})
	}
}

// A batch failure of the consumer (sqsbatch.FailBatch) is passed on untouched: the record stays
// retrying, and the redelivery closes its loop.
func TestRetriesPassesABatchFailureOn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec, _, _ := e.table.Open(ctx, webhookRecord("evt_batch"))
	if _, ok, err := e.table.Retry(ctx, rec.ID, "ops", ""); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	rec, _ = e.table.Get(ctx, rec.ID)
	down := sqsbatch.FailBatch(errors.New("store unavailable"))
	next := func(context.Context, queue.Message) error { return down }
	h := &deadletter.Retries{Loop: e.table, Now: e.clock.Now, Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
	each := func(ctx context.Context, m queue.Message) error { return next(ctx, m) }
	if err := handle(ctx, h, each, retriedMessage("m-retry", rec)); err != down {
		t.Fatalf("got %v, want the batch failure itself", err)
	}
	if got, _ := e.table.Get(ctx, rec.ID); got.Status != deadletter.StatusRetrying || len(got.Tries) != 1 {
		t.Fatalf("record %s with %d attempts after a batch failure", got.Status, len(got.Tries))
	}
	next = func(context.Context, queue.Message) error { return nil }
	if err := handle(ctx, h, each, retriedMessage("m-retry", rec)); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.table.Get(ctx, rec.ID); got.Status != deadletter.StatusResolved {
		t.Fatalf("record %s after the redelivery", got.Status)
	}
}

// brokenLoop cannot read or write the ledger: the table is unavailable.
type brokenLoop struct{ readFails bool }

var errTableDown = errors.New("table unavailable")

func (b brokenLoop) RetryDone(context.Context, string) (bool, error) {
	if b.readFails {
		return false, errTableDown
	}
	return false, nil
}

func (brokenLoop) RetrySucceeded(context.Context, string, string, string) (deadletter.Record, bool, error) {
	return deadletter.Record{}, false, errTableDown
}

func (brokenLoop) RetryFailed(context.Context, string, string, deadletter.Try) (deadletter.Record, bool, error) {
	return deadletter.Record{}, false, errTableDown
}

// When the record cannot be read or updated the retried message fails, so it comes back and the
// report is made again; a message without retry attributes never touches the table.
func TestRetriesFailTheMessageWhenTheRecordCannotBeUpdated(t *testing.T) {
	rec := deadletter.Record{ID: "dl_0123456789abcdef01234567", Retries: 1}
	tests := map[string]struct {
		loop     brokenLoop
		m        queue.Message
		nextFail bool
		wantRuns int64
		wantErr  bool
	}{
		"ledger unreadable: not run":  {loop: brokenLoop{readFails: true}, m: retriedMessage("m", rec), wantErr: true},
		"success not recorded":        {m: retriedMessage("m", rec), wantRuns: 1, wantErr: true},
		"failure not recorded":        {m: retriedMessage("m", rec), nextFail: true, wantRuns: 1, wantErr: true},
		"no retry attributes: passes": {loop: brokenLoop{readFails: true}, m: queue.Message{ID: "m"}, wantRuns: 1},
		"no retry attributes: fails":  {loop: brokenLoop{readFails: true}, m: queue.Message{ID: "m"}, nextFail: true, wantRuns: 1, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next := &counting{fail: map[string]bool{"m": tc.nextFail}}
			h := &deadletter.Retries{Loop: tc.loop, Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
			err := handle(context.Background(), h, next.Handle, tc.m)
			if (err != nil) != tc.wantErr || next.n.Load() != tc.wantRuns {
				t.Fatalf("error %v, runs %d; want error %v, runs %d", err, next.n.Load(), tc.wantErr, tc.wantRuns)
			}
			if tc.wantErr && tc.m.Attributes != nil && !errors.Is(err, errTableDown) {
				t.Fatalf("error %v does not name the table's", err)
			}
		})
	}
}

func TestRetryEndsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec, _, _ := e.table.Open(ctx, webhookRecord("evt_once"))
	if _, _, err := e.table.Retry(ctx, rec.ID, "ops", ""); err != nil {
		t.Fatal(err)
	}
	rt := deadletter.RetryID(rec.ID, 1)
	var changed atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			var ok bool
			var err error
			if i%2 == 0 {
				_, ok, err = e.table.RetrySucceeded(ctx, rec.ID, rt, "applied")
			} else {
				_, ok, err = e.table.RetryFailed(ctx, rec.ID, rt, deadletter.Try{Error: "failed"})
			}
			if err != nil {
				t.Error(err)
			}
			if ok {
				changed.Add(1)
			}
		})
	}
	wg.Wait()
	if changed.Load() != 1 {
		t.Fatalf("%d reports changed the record, want 1", changed.Load())
	}
	if done, err := e.table.RetryDone(ctx, rt); err != nil || !done {
		t.Fatalf("retry done %v %v", done, err)
	}
	// A stale retry id (not the record's current retry) changes nothing.
	if _, ok, err := e.table.RetrySucceeded(ctx, rec.ID, deadletter.RetryID(rec.ID, 7), "x"); ok || err != nil {
		t.Fatalf("stale retry: %v %v", ok, err)
	}
	if _, _, err := e.table.RetrySucceeded(ctx, "dl_nothex", rt, "x"); err == nil {
		t.Fatal("a malformed record id was accepted")
	}
}

// TestSecondClickAfterTheRetryEnded: the first click's retry already failed again (the record
// is open with the attempt) when the second click of the same double click arrives; carrying
// the retries the operator saw, it is a no-op, not a second retry.
func TestSecondClickAfterTheRetryEnded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec, _, _ := e.table.Open(ctx, webhookRecord("evt_click"))
	if _, ok, err := e.table.RetrySeen(ctx, rec.ID, "ops", "", rec.Retries); err != nil || !ok {
		t.Fatalf("first click: %v %v", ok, err)
	}
	e.deliver(t)
	if _, _, err := e.table.RetryFailed(ctx, rec.ID, deadletter.RetryID(rec.ID, 1), deadletter.Try{Error: "failed"}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := e.table.RetrySeen(ctx, rec.ID, "ops", "", rec.Retries)
	e.deliver(t)
	if err != nil || ok || got.Status != deadletter.StatusOpen || e.sent.count() != 1 {
		t.Fatalf("second click: retried %v (%v), status %s, %d sent", ok, err, got.Status, e.sent.count())
	}
	// A deliberate retry of the reopened record, from a page showing it, goes ahead.
	_, ok, err = e.table.RetrySeen(ctx, rec.ID, "ops", "", got.Retries)
	e.deliver(t)
	if err != nil || !ok || e.sent.count() != 2 {
		t.Fatalf("next retry: %v %v, %d sent", ok, err, e.sent.count())
	}
}

// FuzzRetriesAttributes: whatever retry attributes a message carries, the wrapper never
// panics, and a message whose attributes are not a record id and a retry id of ours reaches
// the consumer untouched and unreported.
func FuzzRetriesAttributes(f *testing.F) {
	f.Add("dl_0123456789abcdef01234567", "rt_0123456789abcdef01234567")
	f.Add("dl_x", "rt_y")
	f.Add("", "rt_0123456789abcdef01234567")
	f.Add("dl_0123456789ABCDEF01234567", "rt_\x00")
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, rec, rt string) {
		next := &counting{}
		h := &deadletter.Retries{Loop: e.table}
		m := queue.Message{ID: "m", Attributes: map[string]string{deadletter.AttrRecordID: rec, deadletter.AttrRetryID: rt}}
		err := handle(context.Background(), h, next.Handle, m)
		if next.n.Load() > 1 || (next.n.Load() == 0 && err == nil && !strings.HasPrefix(rt, "rt_")) {
			t.Fatalf("worked %d times, error %v", next.n.Load(), err)
		}
	})
}

func TestActionsAreOnlyThoseThatApply(t *testing.T) {
	queue := deadletter.Target{Kind: deadletter.TargetQueue, Queue: "webhooks"}
	tests := map[string]struct {
		r    deadletter.Record
		want string
	}{
		"open with a target": {deadletter.Record{Status: deadletter.StatusOpen, Target: queue}, "[retry override resolve ignore]"},
		"retrying":           {deadletter.Record{Status: deadletter.StatusRetrying, Target: queue}, "[override resolve ignore]"},
		"ignored":            {deadletter.Record{Status: deadletter.StatusIgnored, Target: queue}, "[retry override resolve]"},
		"a hard decline: retry last": {deadletter.Record{Status: deadletter.StatusOpen, Cause: deadletter.CauseDeclineHard,
			Target: deadletter.Target{Kind: deadletter.TargetRecovery, PaymentID: "pay_x"}}, "[override resolve ignore retry]"},
		"a difference: no target": {deadletter.Record{Status: deadletter.StatusOpen, Cause: deadletter.CauseReconAmountMismatch}, "[override resolve ignore]"},
		"resolved":                {deadletter.Record{Status: deadletter.StatusResolved, Target: queue}, "[]"},
		"overridden":              {deadletter.Record{Status: deadletter.StatusOverridden}, "[]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := fmt.Sprint(tc.r.Actions()); got != tc.want {
				t.Fatalf("actions %s, want %s", got, tc.want)
			}
			if e := tc.r.OverrideEffect(); !strings.Contains(e, "changes only this record") {
				t.Fatalf("override effect %q", e)
			}
		})
	}
	amount := deadletter.Record{Cause: deadletter.CauseReconAmountMismatch}.OverrideEffect()
	if !strings.Contains(amount, "refund or charge the difference at the provider") {
		t.Fatalf("amount mismatch override effect %q", amount)
	}
}
