// Package adapt connects what opens dead-letter records (payment recovery, reconciliation) and
// what a retry goes back to (the queues, recovery) to the dead-letter table. The Lambda functions
// and the local stack use the same adapters. It is a package of its own so that the table's own
// users (the sink, the operator API) do not link recovery's and reconciliation's clients.
package adapt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
)

// RecoverySink is the recovery.DeadLetterSink on a dead-letter table. Table.Open is idempotent on the
// record id derived from DeadLetter.Key, as recovery requires.
type RecoverySink struct{ Table deadletter.Opener }

var (
	_ recovery.DeadLetterSink = RecoverySink{}
	_ recovery.RetryCloser    = RecoverySink{}
)

// Open implements recovery.DeadLetterSink.
func (s RecoverySink) Open(ctx context.Context, d recovery.DeadLetter) error {
	attempts := make([]deadletter.Attempt, 0, len(d.Attempts))
	for _, a := range d.Attempts {
		msg := string(a.Outcome)
		if a.Class != "" {
			msg += " (" + string(a.Class) + ")"
		}
		attempts = append(attempts, deadletter.Attempt{At: a.At, Error: msg})
	}
	if d.RetryOf != nil {
		// An operator's retry that stopped again: the same record, open again, with the
		// retry's attempt (what it did, or why it did not charge) appended.
		loop, ok := s.Table.(deadletter.Loop)
		if !ok {
			return fmt.Errorf("deadletter: the recovery sink cannot reopen record %s", d.RetryOf.DeadLetterID)
		}
		a := deadletter.Attempt{Error: d.Explanation}
		if n := len(d.Attempts); n > 0 {
			a.At = d.Attempts[n-1].At
			if d.Attempts[n-1].Class != "" && d.Reason == string(recovery.ReasonChargeNow) {
				a.Response = string(d.Attempts[n-1].Outcome) + " (" + string(d.Attempts[n-1].Class) + ")"
			}
		}
		_, _, err := loop.RetryFailed(ctx, d.RetryOf.DeadLetterID, d.RetryOf.RetryID, a)
		return err
	}
	rd := deadletter.RecoveryDeadLetter{Key: d.Key, Source: d.Source, PaymentID: d.PaymentID, Invoice: d.Invoice,
		Reason: d.Reason, Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Attempts: attempts, Payload: d.Payload}
	// A recovery that stopped on the decline itself (not on its
	// schedule) is filed under the decline's class, so the console says what the issuer said.
	if n := len(d.Attempts); n > 0 && d.Reason != "exhausted" && d.Attempts[n-1].Class != "" {
		rd.Reason = string(deadletter.DeclineClass(d.Attempts[n-1].Class))
	}
	_, _, err := s.Table.Open(ctx, deadletter.FromRecovery(rd))
	return err
}

// RetrySucceeded implements recovery.RetryCloser: the record of a retried recovery is resolved.
func (s RecoverySink) RetrySucceeded(ctx context.Context, l recovery.RetryLink, outcome string) error {
	loop, ok := s.Table.(deadletter.Loop)
	if !ok {
		return fmt.Errorf("deadletter: the recovery sink cannot resolve record %s", l.DeadLetterID)
	}
	_, _, err := loop.RetrySucceeded(ctx, l.DeadLetterID, l.RetryID, outcome)
	return err
}

// ReconSink is the recon.Sink on a dead-letter table: one record per difference.
type ReconSink struct{ Table deadletter.Opener }

var _ recon.Sink = ReconSink{}

// Open implements recon.Sink.
func (r ReconSink) Open(ctx context.Context, d recon.Difference) error {
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
	_, _, err = r.Table.Open(ctx, deadletter.Record{Source: deadletter.SourceReconciliation, Key: d.Key,
		Class: deadletter.Class("recon_" + string(d.Class)), Facts: facts, Payload: payload, PaymentID: d.PaymentID,
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction,
		Attempts: []deadletter.Attempt{{At: d.FoundAt, Error: "found by reconciliation run " + d.RunID}}})
	return err
}

// Sender is the one queue call Requeuer makes; sqsqueue.Queue satisfies it.
type Sender interface {
	Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error)
}

// Requeuer carries out an operator's retry: a dead message goes back
// to the queue it died on (the DLQ's name without "-dlq"), a stopped recovery starts a new round.
type Requeuer struct {
	Queues    map[string]Sender // by queue name, e.g. "twice-prod-webhooks"
	Store     store.Store
	Recoverer *recovery.Recoverer
	// Reconcile, when set, re-runs a failed reconciliation run (recon.Reconciler.Handle with
	// the run's input) and Loop closes the record's loop with the result: resolved when the
	// run completes, open with the attempt appended when it fails again.
	Reconcile func(ctx context.Context, input json.RawMessage) (recon.Report, error)
	Loop      deadletter.Loop
	// ReconcileAtNextRun, without Reconcile (the operator API in AWS, which has no provider
	// client), leaves a retried run's record retrying for the reconciler's next scheduled run
	// to carry out (PendingReconciles).
	ReconcileAtNextRun bool
}

var _ deadletter.Requeuer = Requeuer{}

// Requeue implements deadletter.Requeuer.
func (q Requeuer) Requeue(ctx context.Context, t deadletter.Target, retryID string) error {
	switch t.Kind {
	case deadletter.TargetQueue:
		dst, ok := q.Queues[strings.TrimSuffix(t.Queue, "-dlq")]
		if !ok {
			return fmt.Errorf("deadletter: no queue %q to retry into", t.Queue)
		}
		// The consumer (deadletter.Retries) dedupes on the retry id and closes the record's loop.
		_, err := dst.Send(ctx, t.Body, queue.SendOptions{Attributes: deadletter.RetryAttributes(t, retryID)})
		return err
	case deadletter.TargetRecovery:
		p, err := payments.Get(ctx, q.Store, t.PaymentID)
		if err != nil {
			return err
		}
		// Round 1 was the automatic recovery; retry n is round n+1, with its own attempt keys
		// and execution name (a second start of the same retry starts nothing). It charges at
		// once, counting the stopped round's attempts (kept in the target) against the caps.
		var prior recovery.State
		if len(t.Body) > 0 {
			_ = json.Unmarshal(t.Body, &prior) // an older record without them: the plan step starts from the decline
		}
		return q.Recoverer.ChargeNow(ctx, p, t.Retry+1, prior.Attempts,
			recovery.RetryLink{DeadLetterID: t.RecordID, RetryID: retryID})
	case deadletter.TargetReconcile:
		if q.Reconcile == nil && q.ReconcileAtNextRun {
			return nil // the record stays retrying: the next scheduled run picks it up
		}
		if q.Reconcile == nil || q.Loop == nil {
			return deadletter.ErrNotRetryable
		}
		// The run id is the window, so a second run of the same retry replays its report.
		rep, err := q.Reconcile(ctx, t.Body)
		if err != nil {
			_, _, lerr := q.Loop.RetryFailed(ctx, t.RecordID, retryID, deadletter.Attempt{
				Error: "The reconciliation run failed again (retry " + retryID + "); the log says why."})
			return lerr
		}
		_, _, err = q.Loop.RetrySucceeded(ctx, t.RecordID, retryID, fmt.Sprintf(
			"Reconciliation run %s completed: %d differences found.", rep.RunID, len(rep.Differences)))
		return err
	}
	return deadletter.ErrNotRetryable
}

// PendingReconciles is the reconciler function's handler: the scheduled (or requested) run,
// then every retried failed run waiting in the dead-letter table (records retrying with class
// recon_run_failed, left there by the operator API's Requeuer with ReconcileAtNextRun), each
// run again over its own input and its loop closed: resolved when it completes, open with the
// attempt appended when it fails. A record it could not close stays retrying and the next run
// tries again, so a retry waits at most one schedule period.
type PendingReconciles struct {
	Table *deadletter.Table
	Run   func(ctx context.Context, input json.RawMessage) (recon.Report, error)
	Log   *slog.Logger
}

// Handle runs the input's reconciliation, then the pending retries; it answers the input's
// report and error.
func (p PendingReconciles) Handle(ctx context.Context, input json.RawMessage) (recon.Report, error) {
	rep, err := p.Run(ctx, input)
	if n, perr := p.RunPending(ctx); perr != nil {
		p.log().ErrorContext(ctx, "retried reconciliation runs not all carried out; the next run tries again", "done", n, "error", perr)
	}
	return rep, err
}

// RunPending carries out the waiting retries and returns how many it closed.
func (p PendingReconciles) RunPending(ctx context.Context) (int, error) {
	page, err := p.Table.List(ctx, deadletter.Filter{Status: deadletter.StatusRetrying, Class: deadletter.ClassReconRunFailed, Limit: deadletter.MaxLimit})
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, r := range page.Records {
		if r.Target.Kind != deadletter.TargetReconcile {
			continue
		}
		q := Requeuer{Reconcile: p.Run, Loop: p.Table}
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

func (p PendingReconciles) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}
