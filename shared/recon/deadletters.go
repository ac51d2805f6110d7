package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/runtwice/twice/shared/deadletter"
)

// DeadLetterRecords is the Sink on the dead-letter table: one record per difference, idempotent
// on the difference's key.
type DeadLetterRecords struct{ Records deadletter.Opener }

var _ Sink = DeadLetterRecords{}

// Open implements Sink.
func (r DeadLetterRecords) Open(ctx context.Context, d Difference) error {
	payload, err := json.Marshal(d)
	if err != nil {
		return err
	}
	facts := deadletter.Facts{PaymentID: d.PaymentID, Provider: "stripe"}
	if d.Local != nil {
		facts.Local = d.Local.Status
	}
	if len(d.Provider) > 0 {
		facts.Remote = d.Provider[0].Status
	}
	if rf := d.Refund; rf != nil {
		// A refund difference is about the refund's two sides, not the payment's.
		facts.Local, facts.Remote = "", ""
		if rf.Local != nil {
			facts.Local = money(rf.Local.Amount, rf.Local.Currency) + " " + rf.Local.Status
		}
		if rf.Provider != nil {
			facts.Remote = money(rf.Provider.Amount, rf.Provider.Currency) + " " + rf.Provider.Status
		}
	}
	_, _, err = r.Records.Open(ctx, deadletter.Record{Source: deadletter.SourceReconciliation, Key: d.Key,
		Cause: deadletter.Cause("recon_" + string(d.Kind)), Facts: facts, Payload: payload, PaymentID: d.PaymentID,
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction,
		Tries: []deadletter.Try{{At: d.FoundAt, Error: "found by reconciliation run " + d.RunID}}})
	return err
}

// Requeuer is the deadletter.Requeuer of a failed reconciliation run
// (deadletter.TargetReconcile): it runs the run's input again (Reconciler.Handle) and closes
// the record's loop on Loop with the result: resolved when the run completes, open with the
// attempt appended when it fails again. The run id is the window, so a second run of the same
// retry replays its report.
type Requeuer struct {
	Run  func(ctx context.Context, input json.RawMessage) (Report, error)
	Loop deadletter.Loop
}

var _ deadletter.Requeuer = Requeuer{}

// Requeue implements deadletter.Requeuer for deadletter.TargetReconcile.
func (q Requeuer) Requeue(ctx context.Context, t deadletter.Target, retryID string) error {
	if t.Kind != deadletter.TargetReconcile || q.Run == nil || q.Loop == nil {
		return deadletter.ErrNotRetryable
	}
	rep, err := q.Run(ctx, t.Body)
	if err != nil {
		_, _, lerr := q.Loop.RetryFailed(ctx, t.RecordID, retryID, deadletter.Try{
			Error: "The reconciliation run failed again (retry " + retryID + "); the log says why."})
		return lerr
	}
	_, _, err = q.Loop.RetrySucceeded(ctx, t.RecordID, retryID, fmt.Sprintf(
		"Reconciliation run %s completed: %d differences found.", rep.RunID, len(rep.Differences)))
	return err
}

// RequeueAtNextRun is the deadletter.Requeuer of a failed reconciliation run where no
// reconciler is at hand (the outbox relay in AWS, which has no provider client): the record
// stays retrying and the reconciler carries it out after its next pass of either schedule
// (PendingRetries.After).
type RequeueAtNextRun struct{}

// Requeue implements deadletter.Requeuer: it leaves the retry to the next run.
func (RequeueAtNextRun) Requeue(_ context.Context, t deadletter.Target, _ string) error {
	if t.Kind != deadletter.TargetReconcile {
		return deadletter.ErrNotRetryable
	}
	return nil
}

// PendingRetries carries out, after each of the reconciler function's passes (After), every
// retried failed run waiting in the dead-letter table (records retrying with class
// recon_run_failed, left there by RequeueAtNextRun), each run again over its own input and its
// loop closed (Requeuer): resolved when it completes, open with the attempt appended when it
// fails. A record it could not close stays retrying and the next pass tries again, so a retry
// waits at most the shortest schedule period.
type PendingRetries struct {
	Records *deadletter.Records
	Run     func(ctx context.Context, input json.RawMessage) (Report, error)
	Log     *slog.Logger
}

// After is next followed by the waiting retries. The reconciler function wraps every pass in
// it, the reconciliation's (hourly) and the backfill's (every 15 minutes), so a retry waits at
// most the shorter period. It answers next's result and error.
func (p PendingRetries) After(next func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, input json.RawMessage) (any, error) {
		out, err := next(ctx, input)
		if n, perr := p.RunPending(ctx); perr != nil {
			p.log().ErrorContext(ctx, "retried reconciliation runs not all carried out; the next pass tries again", "done", n, "error", perr)
		}
		return out, err
	}
}

// RunPending carries out the waiting retries and returns how many it closed.
func (p PendingRetries) RunPending(ctx context.Context) (int, error) {
	page, err := p.Records.List(ctx, deadletter.Filter{Status: deadletter.StatusRetrying, Cause: deadletter.CauseReconRunFailed, Limit: deadletter.MaxLimit})
	if err != nil {
		return 0, err
	}
	q := Requeuer{Run: p.Run, Loop: p.Records}
	done := 0
	var errs []error
	for _, r := range page.Records {
		if r.Target.Kind != deadletter.TargetReconcile {
			continue
		}
		t := r.Target
		t.Retry, t.RecordID = r.Retries, r.ID
		if err := q.Requeue(ctx, t, deadletter.RetryID(r.ID, r.Retries)); err != nil {
			errs = append(errs, err)
			continue
		}
		done++
	}
	return done, errors.Join(errs...)
}

func (p PendingRetries) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}
