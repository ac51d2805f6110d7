package deadletter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
)

func TestOpenIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first, created, err := e.table.Open(ctx, webhookRecord("evt_1"))
	if err != nil || !created {
		t.Fatalf("first open: created %v err %v", created, err)
	}
	if first.ID != deadletter.RecordID(deadletter.SourceWebhook, "webhook:stripe:evt_1") {
		t.Errorf("id %s is not derived from the source key", first.ID)
	}
	if !strings.Contains(first.Explanation, "evt_1") || first.SuggestedAction == "" {
		t.Errorf("texts not written: %q / %q", first.Explanation, first.SuggestedAction)
	}
	e.clock.Add(time.Minute)
	again, created, err := e.table.Open(ctx, webhookRecord("evt_1"))
	if err != nil || created {
		t.Fatalf("second open: created %v err %v", created, err)
	}
	if len(again.Tries) != 1 || len(again.Audit) != 1 || again.Version != first.Version {
		t.Errorf("second open changed the record: %d attempts, %d audit, version %d->%d", len(again.Tries), len(again.Audit), first.Version, again.Version)
	}
	if n, _ := e.table.OpenCount(ctx); n != 1 {
		t.Errorf("open count %d, want 1", n)
	}
}

func TestDoubleClickedRetryRetriesOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, _, err := e.table.Open(ctx, webhookRecord("evt_2"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	retried := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := e.table.Retry(ctx, r.ID, "alice", "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				retried++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	e.deliver(t)
	if retried != 1 || e.sent.count() != 1 {
		t.Fatalf("8 concurrent clicks: %d retried, %d sent; want 1 and 1", retried, e.sent.count())
	}
	if e.sent.ids[0] != deadletter.RetryID(r.ID, 1) {
		t.Errorf("retry id %s, want RetryID(id, 1)", e.sent.ids[0])
	}
	got, _ := e.table.Get(ctx, r.ID)
	if got.Status != deadletter.StatusRetrying || got.Retries != 1 {
		t.Errorf("status %s retries %d", got.Status, got.Retries)
	}
	var retries int
	for _, a := range got.Audit {
		if a.Action == deadletter.ActionRetry {
			retries++
			if a.Actor != "alice" || a.From != deadletter.StatusOpen || a.To != deadletter.StatusRetrying {
				t.Errorf("audit entry %+v", a)
			}
		}
	}
	if retries != 1 {
		t.Errorf("%d retry audit entries, want 1", retries)
	}
	if n, _ := e.table.OpenCount(ctx); n != 0 {
		t.Errorf("open count %d after retry, want 0", n)
	}
}

func TestRetryThatDiesAgainReopens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, _, _ := e.table.Open(ctx, webhookRecord("evt_3"))
	if _, _, err := e.table.Retry(ctx, r.ID, "bob", "try again"); err != nil {
		t.Fatal(err)
	}
	e.deliver(t)
	// The same dead message delivered again changes nothing.
	same, _, _ := e.table.Open(ctx, webhookRecord("evt_3"))
	if same.Status != deadletter.StatusRetrying {
		t.Fatalf("duplicate of the old message reopened the record: %s", same.Status)
	}
	// The retried message (a new message id) died again.
	again := webhookRecord("evt_3")
	again.Tries[0].MessageID = "m-retry"
	got, created, err := e.table.Open(ctx, again)
	if err != nil || created {
		t.Fatalf("created %v err %v", created, err)
	}
	if got.Status != deadletter.StatusOpen || len(got.Tries) != 2 || got.Audit[len(got.Audit)-1].Action != deadletter.ActionReopened {
		t.Errorf("status %s, %d attempts, last audit %+v", got.Status, len(got.Tries), got.Audit[len(got.Audit)-1])
	}
	if n, _ := e.table.OpenCount(ctx); n != 1 {
		t.Errorf("open count %d, want 1", n)
	}
	// The next retry has the next retry number.
	if _, ok, err := e.table.Retry(ctx, r.ID, "bob", ""); !ok || err != nil {
		t.Fatalf("second retry: %v %v", ok, err)
	}
	e.deliver(t)
	if want := deadletter.RetryID(r.ID, 2); e.sent.ids[1] != want {
		t.Errorf("second retry id %s, want %s", e.sent.ids[1], want)
	}
}

func TestActions(t *testing.T) {
	tests := map[string]struct {
		act        func(tb *deadletter.Records, id string) (deadletter.Record, error)
		wantErr    error
		wantStatus deadletter.Status
		wantAudit  string
	}{
		"override without a note is refused": {
			act: func(tb *deadletter.Records, id string) (deadletter.Record, error) {
				return tb.Override(context.Background(), id, "dan", "paid", "  ")
			},
			wantErr: deadletter.ErrNoteRequired, wantStatus: deadletter.StatusOpen,
		},
		"override without an outcome is refused": {
			act: func(tb *deadletter.Records, id string) (deadletter.Record, error) {
				return tb.Override(context.Background(), id, "dan", "", "called the customer")
			},
			wantErr: deadletter.ErrNoteRequired, wantStatus: deadletter.StatusOpen,
		},
		"override": {
			act: func(tb *deadletter.Records, id string) (deadletter.Record, error) {
				return tb.Override(context.Background(), id, "dan", "paid by bank transfer", "customer sent proof")
			},
			wantStatus: deadletter.StatusOverridden, wantAudit: deadletter.ActionOverride,
		},
		"resolve": {
			act: func(tb *deadletter.Records, id string) (deadletter.Record, error) {
				return tb.MarkResolved(context.Background(), id, "erin", "")
			},
			wantStatus: deadletter.StatusResolved, wantAudit: deadletter.ActionResolve,
		},
		"ignore": {
			act: func(tb *deadletter.Records, id string) (deadletter.Record, error) {
				return tb.Ignore(context.Background(), id, "erin", "test noise")
			},
			wantStatus: deadletter.StatusIgnored, wantAudit: deadletter.ActionIgnore,
		},
		"unknown id": {
			act: func(tb *deadletter.Records, _ string) (deadletter.Record, error) {
				return tb.MarkResolved(context.Background(), "dl_nope", "erin", "")
			},
			wantErr: deadletter.ErrNotFound, wantStatus: deadletter.StatusOpen,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			r, _, _ := e.table.Open(ctx, webhookRecord("evt_a"))
			_, err := tc.act(e.table, r.ID)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			got, _ := e.table.Get(ctx, r.ID)
			if got.Status != tc.wantStatus {
				t.Errorf("status %s, want %s", got.Status, tc.wantStatus)
			}
			last := got.Audit[len(got.Audit)-1]
			if tc.wantAudit == "" {
				if len(got.Audit) != 1 {
					t.Errorf("a refused action was audited: %+v", got.Audit)
				}
				return
			}
			if last.Action != tc.wantAudit || last.From != deadletter.StatusOpen || last.To != tc.wantStatus || last.Actor == "" {
				t.Errorf("audit %+v", last)
			}
			wantOpen := int64(0)
			if tc.wantStatus == deadletter.StatusOpen {
				wantOpen = 1
			}
			if n, _ := e.table.OpenCount(ctx); n != wantOpen {
				t.Errorf("open count %d, want %d", n, wantOpen)
			}
			// A closed record takes no retry.
			if tc.wantStatus == deadletter.StatusResolved || tc.wantStatus == deadletter.StatusOverridden {
				if _, _, err := e.table.Retry(ctx, r.ID, "x", ""); !errors.Is(err, deadletter.ErrClosed) {
					t.Errorf("retry of a closed record: %v", err)
				}
			}
		})
	}
}

func TestRetryWithoutTarget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, _, _ := e.table.Open(ctx, deadletter.Record{Source: deadletter.SourceReconciliation, Key: "run1:pi_1",
		Cause: deadletter.CauseReconMissingLocally, Facts: deadletter.Facts{PaymentID: "pi_1"}})
	if _, _, err := e.table.Retry(ctx, r.ID, "x", ""); !errors.Is(err, deadletter.ErrNotRetryable) {
		t.Fatalf("err %v, want ErrNotRetryable", err)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		r := webhookRecord("evt_list_" + string(rune('a'+i)))
		if i%2 == 1 {
			r.Source, r.Cause, r.Key = deadletter.SourceResolve, deadletter.CauseHTTPUnknown, "resolve:pay_"+string(rune('a'+i))
		}
		if _, _, err := e.table.Open(ctx, r); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Hour)
	}
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		f    deadletter.Filter
		want int
	}{
		"all open":      {deadletter.Filter{}, 7},
		"by source":     {deadletter.Filter{Source: deadletter.SourceResolve}, 3},
		"by class":      {deadletter.Filter{Cause: deadletter.CauseProcessing}, 4},
		"by text":       {deadletter.Filter{Text: "EVT_LIST_C"}, 1},
		"time range":    {deadletter.Filter{From: start.Add(2 * time.Hour), To: start.Add(4 * time.Hour)}, 3},
		"other status":  {deadletter.Filter{Status: deadletter.StatusResolved}, 0},
		"paged by two":  {deadletter.Filter{Limit: 2}, 7},
		"paged, source": {deadletter.Filter{Limit: 1, Source: deadletter.SourceWebhook}, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			seen := map[string]bool{}
			var prev time.Time
			f := tc.f
			for pages := 0; pages < 20; pages++ {
				p, err := e.table.List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range p.Records {
					if seen[r.ID] {
						t.Errorf("%s listed twice", r.ID)
					}
					if !prev.IsZero() && r.CreatedAt.After(prev) {
						t.Errorf("not newest first")
					}
					seen[r.ID], prev = true, r.CreatedAt
				}
				if p.Cursor == "" {
					break
				}
				f.Cursor = p.Cursor
			}
			if len(seen) != tc.want {
				t.Errorf("%d records, want %d", len(seen), tc.want)
			}
		})
	}
}

func TestBulkRetry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, ev := range []string{"evt_b1", "evt_b2", "evt_b3"} {
		_, _, _ = e.table.Open(ctx, webhookRecord(ev))
	}
	_, _, _ = e.table.Open(ctx, deadletter.Record{Source: deadletter.SourceReconciliation, Key: "k", Cause: deadletter.CauseReconDuplicateCharge})
	res, err := e.table.BulkRetry(ctx, deadletter.Filter{}, "frank", "")
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(t)
	if res.Matched != 4 || res.Retried != 3 || res.Skipped != 1 || e.sent.count() != 3 {
		t.Errorf("result %+v, sent %d", res, e.sent.count())
	}
	again, _ := e.table.BulkRetry(ctx, deadletter.Filter{}, "frank", "")
	e.deliver(t)
	if again.Retried != 0 || e.sent.count() != 3 {
		t.Errorf("second bulk retry re-sent: %+v", again)
	}
}

func TestOpenHistoryAndMetrics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r1, _, _ := e.table.Open(ctx, webhookRecord("evt_h1"))
	e.clock.Add(2 * time.Hour)
	_, _, _ = e.table.Open(ctx, webhookRecord("evt_h2"))
	e.clock.Add(time.Hour)
	_, _ = e.table.MarkResolved(ctx, r1.ID, "g", "")
	hist, err := e.table.OpenHistory(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 1, 1, 2, 1} // 07h (before anything), 08h, 09h carried, 10h, 11h
	if len(hist) != len(want) {
		t.Fatalf("%d hours, want %d", len(hist), len(want))
	}
	for i, h := range hist {
		if h.Open != want[i] {
			t.Errorf("hour %s: %d, want %d", h.Hour.Format("15h"), h.Open, want[i])
		}
	}
	lines := strings.Split(strings.TrimSpace(e.metrics.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `"DeadLetterOpen":1`) || !strings.Contains(lines[0], `"CloudWatchMetrics"`) {
		t.Errorf("metric lines: %q", lines)
	}
}

// TestRetryAgainstTheSuggestionNeedsANote: a hard decline's suggestion says not to retry, so
// a retry needs a note saying why, and a bulk retry leaves the record alone.
func TestRetryAgainstTheSuggestionNeedsANote(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hard, _, err := e.table.Open(ctx, deadletter.Record{Source: deadletter.SourceRecovery, Key: "recovery:pay_h:1",
		Cause: deadletter.CauseDeclineHard, PaymentID: "pay_h",
		Target: deadletter.Target{Kind: deadletter.TargetRecovery, PaymentID: "pay_h"}})
	if err != nil {
		t.Fatal(err)
	}
	if hard.RetryAdvised() {
		t.Fatal("a hard decline advises a retry")
	}
	res, err := e.table.BulkRetry(ctx, deadletter.Filter{}, "frank", "")
	e.deliver(t)
	if err != nil || res.Retried != 0 || res.Skipped != 1 || e.sent.count() != 0 {
		t.Fatalf("bulk retry %+v %v, sent %d", res, err, e.sent.count())
	}
	if _, _, err := e.table.Retry(ctx, hard.ID, "frank", " "); !errors.Is(err, deadletter.ErrRetryNoteRequired) || !errors.Is(err, deadletter.ErrNoteRequired) {
		t.Fatalf("retry without a note: %v", err)
	}
	_, retried, err := e.table.Retry(ctx, hard.ID, "frank", "customer says the card was found")
	e.deliver(t)
	if err != nil || !retried || e.sent.count() != 1 {
		t.Fatalf("retry with a note: %v %v, sent %d", retried, err, e.sent.count())
	}
}
