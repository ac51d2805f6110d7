package recovery

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/store"
)

// DeadLetterRecords is the DeadLetterSink and RetryCloser on the dead-letter table: a stopped
// recovery is a record an operator can work. Records.Open is idempotent on the record id derived
// from DeadLetter.Key, as Steps requires.
type DeadLetterRecords struct{ Records deadletter.Opener }

var (
	_ DeadLetterSink = DeadLetterRecords{}
	_ RetryCloser    = DeadLetterRecords{}
)

// Open implements DeadLetterSink.
func (s DeadLetterRecords) Open(ctx context.Context, d DeadLetter) error {
	attempts := make([]deadletter.Try, 0, len(d.Charges))
	for _, a := range d.Charges {
		msg := string(a.Result)
		if a.Class != "" {
			msg += " (" + string(a.Class) + ")"
		}
		attempts = append(attempts, deadletter.Try{At: a.At, Error: msg})
	}
	if d.RetryOf != nil {
		// An operator's retry that stopped again: the same record, open again, with the
		// retry's attempt (what it did, or why it did not charge) appended.
		loop, ok := s.Records.(deadletter.Loop)
		if !ok {
			return fmt.Errorf("recovery: the dead-letter table cannot reopen record %s", d.RetryOf.DeadLetterID)
		}
		a := deadletter.Try{Error: d.Explanation}
		if n := len(d.Charges); n > 0 {
			a.At = d.Charges[n-1].At
			if d.Charges[n-1].Class != "" && d.Reason == string(ReasonChargeNow) {
				a.Response = string(d.Charges[n-1].Result) + " (" + string(d.Charges[n-1].Class) + ")"
			}
		}
		_, _, err := loop.RetryFailed(ctx, d.RetryOf.DeadLetterID, d.RetryOf.RetryID, a)
		return err
	}
	rd := deadletter.RecoveryDeadLetter{Key: d.Key, Source: d.Source, PaymentID: d.PaymentID, Invoice: d.Invoice,
		Reason: d.Reason, Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Tries: attempts, Payload: d.Payload}
	// A recovery that stopped on the decline itself (not on its
	// schedule) is filed under the decline's class, so the console says what the issuer said.
	if n := len(d.Charges); n > 0 && d.Reason != "exhausted" && d.Charges[n-1].Class != "" {
		rd.Reason = string(deadletter.DeclineCause(string(d.Charges[n-1].Class)))
	}
	_, _, err := s.Records.Open(ctx, deadletter.FromRecovery(rd))
	return err
}

// RetrySucceeded implements RetryCloser: the record of a retried recovery is resolved.
func (s DeadLetterRecords) RetrySucceeded(ctx context.Context, l RetryLink, result string) error {
	loop, ok := s.Records.(deadletter.Loop)
	if !ok {
		return fmt.Errorf("recovery: the dead-letter table cannot resolve record %s", l.DeadLetterID)
	}
	_, _, err := loop.RetrySucceeded(ctx, l.DeadLetterID, l.RetryID, result)
	return err
}

// Requeuer is the deadletter.Requeuer of a stopped recovery (deadletter.TargetRecovery): an
// operator's retry starts a new round that charges at once. The round's dead-letter step closes
// the record's loop (DeadLetterRecords): resolved when the charge succeeds, open again with
// the attempt appended when it stops.
type Requeuer struct {
	Store     store.Store
	Recoverer *Recoverer
}

var _ deadletter.Requeuer = Requeuer{}

// Requeue implements deadletter.Requeuer for deadletter.TargetRecovery.
func (q Requeuer) Requeue(ctx context.Context, t deadletter.Target, retryID string) error {
	if t.Kind != deadletter.TargetRecovery {
		return fmt.Errorf("%w: %q is not a recovery target", deadletter.ErrNotRetryable, t.Kind)
	}
	p, err := payments.Get(ctx, q.Store, t.PaymentID)
	if err != nil {
		return err
	}
	// Round 1 was the automatic recovery; retry n is round n+1, with its own attempt keys
	// and execution name (a second start of the same retry starts nothing). It charges at
	// once, counting the stopped round's attempts (kept in the target) against the caps.
	var prior State
	if err := json.Unmarshal(t.Body, &prior); err != nil {
		return fmt.Errorf("%w: record %s holds no stopped round (%v)", deadletter.ErrNotRetryable, t.RecordID, err)
	}
	return q.Recoverer.ChargeNow(ctx, p, t.Retry+1, prior.Charges,
		RetryLink{DeadLetterID: t.RecordID, RetryID: retryID})
}
