package recon_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/recon"
)

// TestRetriesRunAfterEveryPass: a retried failed run waits, retrying, until the reconciler
// function's next pass of either kind; After runs the pass, answers its result and error, and
// then the retry: resolved when its run completes, open again with the attempt when it fails.
func TestRetriesRunAfterEveryPass(t *testing.T) {
	for name, open := range testenv.Stores(deadletter.Table, outbox.Table) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
			table := &deadletter.Records{Store: open(t), Now: func() time.Time { return at }}
			retried := func(input string) deadletter.Record {
				rec, _, err := table.Open(ctx, deadletter.ReconRunFailed(json.RawMessage(input), at))
				if err != nil {
					t.Fatal(err)
				}
				if _, ok, err := table.Retry(ctx, rec.ID, "jwt:ops", ""); !ok || err != nil {
					t.Fatalf("retry: %v %v", ok, err)
				}
				return rec
			}
			good, bad := retried(`{"from":"2026-11-28T00:00:00Z","to":"2026-11-28T01:00:00Z"}`), retried(`{"from":"bad"}`)
			var ran []string
			run := func(_ context.Context, in json.RawMessage) (recon.Report, error) {
				ran = append(ran, string(in))
				if string(in) == `{"from":"bad"}` {
					return recon.Report{}, errors.New("the provider is down")
				}
				return recon.Report{RunID: "r"}, nil
			}
			passErr := errors.New("the pass failed")
			pass := func(context.Context, json.RawMessage) (any, error) {
				ran = append(ran, "pass")
				return "the pass's report", passErr
			}
			out, err := recon.PendingRetries{Records: table, Run: run}.After(pass)(ctx, json.RawMessage(`{"backfill":{}}`))
			if out != "the pass's report" || !errors.Is(err, passErr) {
				t.Fatalf("answered %v, %v: want the pass's", out, err)
			}
			if len(ran) != 3 || ran[0] != "pass" {
				t.Fatalf("ran %q: want the pass, then both retried runs", ran)
			}
			if r, err := table.Get(ctx, good.ID); err != nil || r.Status != deadletter.StatusResolved {
				t.Fatalf("the completed retry: %s (%v), want resolved", r.Status, err)
			}
			r, err := table.Get(ctx, bad.ID)
			if err != nil || r.Status != deadletter.StatusOpen || len(r.Tries) != 2 {
				t.Fatalf("the failed retry: %s with %d attempts (%v), want open with the attempt appended", r.Status, len(r.Tries), err)
			}
		})
	}
}
