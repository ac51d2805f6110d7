package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/store"
)

// Message attributes a queue retry carries, so that its consumer can close the record's loop.
const (
	AttrRecordID = "dead_letter_id"
	AttrRetryID  = "retry_id"
)

// RetryAttributes are the message attributes of a queue retry of t (a Requeuer's copy, with
// RecordID set) under retryID.
func RetryAttributes(t Target, retryID string) map[string]string {
	return map[string]string{AttrRecordID: t.RecordID, AttrRetryID: retryID}
}

// Loop closes the loop of a retry: the consumer of the retried work asks whether the retry is
// already done (a second delivery, a second click that slipped through), and reports how it
// ended. *Records implements it.
type Loop interface {
	RetryDone(ctx context.Context, retryID string) (bool, error)
	RetrySucceeded(ctx context.Context, recordID, retryID, result string) (Record, bool, error)
	RetryFailed(ctx context.Context, recordID, retryID string, a Try) (Record, bool, error)
}

var _ Loop = (*Records)(nil)

// RetryEnd is what the retry ledger keeps per retry id: that it ended, and how.
type RetryEnd struct {
	RecordID  string    `json:"record_id"`
	RetryID   string    `json:"retry_id"`
	Succeeded bool      `json:"succeeded"`
	Result    string    `json:"outcome,omitempty"`
	At        time.Time `json:"at"`
}

func retryPK(retryID string) string { return "retry#" + retryID }

// RetryLedgerRetention is how long a retry's ledger entry is kept (the table's TTL): longer
// than SQS keeps a message (14 days at most), so any redelivery of a retried message finds it.
const RetryLedgerRetention = 30 * 24 * time.Hour

// validIDs reports whether a record id and a retry id have the shapes RecordID and RetryID
// give; attributes of a queue message are checked before they are used as keys.
func validIDs(recordID, retryID string) bool {
	return validID(recordID, "dl_") && validID(retryID, "rt_")
}

func validID(s, prefix string) bool {
	if len(s) != len(prefix)+24 || !strings.HasPrefix(s, prefix) {
		return false
	}
	for _, c := range s[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RetryDone reports whether the retry with the id has ended (succeeded or failed): its ledger
// entry is written in the same transaction as the record's move out of retrying.
func (t *Records) RetryDone(ctx context.Context, retryID string) (bool, error) {
	_, err := t.Store.Get(ctx, Table, retryPK(retryID), "")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deadletter: read retry %s: %w", retryID, err)
	}
	return true, nil
}

// RetrySucceeded moves the record from retrying to resolved because the retried work with
// retryID succeeded; result says what it did, and the audit entry links it. It writes the
// retry's ledger entry in the same transaction, conditioned on there being none, so a second
// report of the same retry changes nothing (changed false). A record no longer retrying under
// this retry id (an operator resolved it meanwhile, or retried it again) is left as it is.
func (t *Records) RetrySucceeded(ctx context.Context, recordID, retryID, result string) (Record, bool, error) {
	result = capText(result, MaxResult)
	return t.endRetry(ctx, recordID, retryID, RetryEnd{Succeeded: true, Result: result}, func(r *Record, now time.Time) {
		r.Audit = append(r.Audit, Audit{At: now, Actor: "system", Action: ActionRetrySucceeded, From: StatusRetrying,
			To: StatusResolved, RetryID: retryID, Result: result})
		r.Status = StatusResolved
	})
}

// RetryFailed returns the record from retrying to open with a appended to its tries,
// because the retried work with retryID failed again: the same record, never a new one. Like
// RetrySucceeded it writes the retry's ledger entry with it, once.
func (t *Records) RetryFailed(ctx context.Context, recordID, retryID string, a Try) (Record, bool, error) {
	a.Error = capText(a.Error, MaxNote)
	return t.endRetry(ctx, recordID, retryID, RetryEnd{Result: a.Error}, func(r *Record, now time.Time) {
		if a.At.IsZero() {
			a.At = now
		}
		r.Tries = append(append([]Try{}, r.Tries...), a)
		r.Audit = append(r.Audit, Audit{At: now, Actor: "system", Action: ActionRetryFailedAgain,
			Note: "the retried work failed again", From: StatusRetrying, To: StatusOpen, RetryID: retryID})
		r.Status = StatusOpen
	})
}

func (t *Records) endRetry(ctx context.Context, recordID, retryID string, res RetryEnd, apply func(r *Record, now time.Time)) (Record, bool, error) {
	if !validIDs(recordID, retryID) {
		return Record{}, false, fmt.Errorf("%w: record %q retry %q", ErrInvalid, recordID, retryID)
	}
	res.RecordID, res.RetryID = recordID, retryID
	ledger := func(_ Record, now time.Time) ([]store.Write, error) {
		res.At = now
		doc, _ := json.Marshal(res)
		return []store.Write{{Table: Table, Put: &store.Item{PK: retryPK(retryID), Doc: doc,
			ExpiresAt: now.Add(RetryLedgerRetention).Unix()}, Cond: store.Cond{Kind: store.NotExists}}}, nil
	}
	r, changed, err := t.changeWith(ctx, recordID, ledger, func(r *Record, now time.Time) (bool, error) {
		if r.Status != StatusRetrying || RetryID(r.ID, r.Retries) != retryID {
			return false, nil
		}
		apply(r, now)
		return true, nil
	})
	if err != nil {
		return r, false, err
	}
	if changed {
		t.log().InfoContext(ctx, "dead-letter retry ended", "record", recordID, "retry_id", retryID,
			"succeeded", res.Succeeded, "status", r.Status)
		return r, true, nil
	}
	// Not retrying under this id: still write the ledger entry, so a redelivery of the same
	// retried message is not worked again.
	if done, derr := t.RetryDone(ctx, retryID); derr == nil && !done {
		ws, _ := ledger(r, t.now().UTC())
		w := ws[0]
		if err := t.Store.Transact(ctx, w); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return r, false, fmt.Errorf("deadletter: write retry %s: %w", retryID, err)
		}
	}
	return r, false, nil
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// The texts of the two queue consumers, for Retries.Done and Retries.Failed.
const (
	WorkerDone     = "was applied by the webhook worker"
	WorkerFailed   = "could not be applied by the webhook worker; its log says why under the message id"
	ResolverDone   = "was run by the payment resolver"
	ResolverFailed = "could not be run by the payment resolver (the provider may still be unavailable); its log says why under the message id"
)

// Retries closes the loop of a message an operator retried, for a queue consumer (the webhook
// worker, the resolver). It sits beside the consumer, never around it: the batch wiring
// (sqsbatch.Batch's Report) asks Ended before the consumer runs and tells Report its result
// after, one call after the other, so the consumer is never called from this package and its
// result comes back here as a value, not through a callback.
//
// A retry already done is not worked again (Ended: the message succeeds at once); a retried
// message the consumer processed resolves its record; one it failed reopens its record with
// the try appended and succeeds, so the message is deleted and the operator gets the
// record back now rather than after the queue's redeliveries. Messages without retry
// attributes are not looked at. When the record cannot be read or updated the message fails,
// so it comes back and the report is made again.
//
//	retries := &deadletter.Retries{Loop: table, Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
//	lambda.Start((&sqsbatch.Batch{Each: w.Handle, Report: retries}).Handle)
type Retries struct {
	Loop Loop
	// Done and Failed complete "the retried message ..." in the result and the try
	// ("was applied by the webhook worker", "could not be applied by the webhook worker").
	Done, Failed string
	Now          func() time.Time
	Log          *slog.Logger
}

// retryOf reads the record id and the retry id a retried message carries; ok is false for a
// message without them, or whose attributes are not ids of ours.
func retryOf(m queue.Message) (rec, rt string, ok bool) {
	rec, rt = m.Attributes[AttrRecordID], m.Attributes[AttrRetryID]
	return rec, rt, validIDs(rec, rt)
}

// Ended reports whether m is a retried message whose retry already ended (a redelivery, a
// second click that slipped through): its consumer need not work it again.
func (h *Retries) Ended(ctx context.Context, m queue.Message) (bool, error) {
	rec, rt, ok := retryOf(m)
	if !ok {
		return false, nil
	}
	done, err := h.Loop.RetryDone(ctx, rt)
	if err != nil {
		return false, err
	}
	if done {
		h.log().InfoContext(ctx, "retried message deduped: its retry already ended", "message_id", m.ID,
			"record", rec, "retry_id", rt)
	}
	return done, nil
}

// Report closes the loop of a retried message with its consumer's result (nil: processed), and
// returns the message's: nil once the record is resolved or reopened, an error when it could
// not be updated. The result of a message without retry attributes is returned as it is.
func (h *Retries) Report(ctx context.Context, m queue.Message, result error) error {
	rec, rt, ok := retryOf(m)
	if !ok {
		return result
	}
	var err error
	if result != nil {
		// The message is done with (deleted); the try points here for the cause.
		h.log().WarnContext(ctx, "retried message failed again; its record goes back to open", "message_id", m.ID,
			"record", rec, "retry_id", rt, "error", result)
		_, _, err = h.Loop.RetryFailed(ctx, rec, rt, Try{At: h.now().UTC(), MessageID: m.ID,
			ReceiveCount: 1, Error: "The retried message " + h.Failed + " (retry " + rt + ")."})
	} else {
		_, _, err = h.Loop.RetrySucceeded(ctx, rec, rt, "The retried message "+h.Done+" (message "+m.ID+").")
	}
	if err != nil {
		// The adapter logs the failure, and SQS delivers the message again.
		return fmt.Errorf("deadletter: record %s of retry %s not updated: %w", rec, rt, err)
	}
	return nil
}

func (h *Retries) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Retries) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// Operator actions, as Actions names them (and as the API's routes end).
const (
	ActRetry    = "retry"
	ActOverride = "override"
	ActResolve  = "resolve"
	ActIgnore   = "ignore"
)

// Actions lists what an operator can do with the record now, in the console's order, the
// first being the one its suggestion points to: only actions that apply (no Retry for a record
// without a retry target or already retrying, none at all for a closed one), so nothing
// offered answers 409. A record whose suggestion says not to retry (RetryAdvised false) lists
// Retry last: it is still possible, with a note saying why (RetrySeen).
func (r Record) Actions() []string {
	if r.Status == StatusResolved || r.Status == StatusOverridden {
		return []string{}
	}
	var out []string
	retry := r.Target.Retryable() && r.Status != StatusRetrying
	if retry && r.RetryAdvised() {
		out = append(out, ActRetry)
	}
	out = append(out, ActOverride, ActResolve)
	if r.Status != StatusIgnored {
		out = append(out, ActIgnore)
	}
	if retry && !r.RetryAdvised() {
		out = append(out, ActRetry)
	}
	return out
}

// againstRetry are the causes whose own suggestion says not to retry: the issuer refuses this
// card for good (hard), the customer withdrew the authorization (cancellation), the customer
// must authenticate first (auth), or the payment may be a duplicate (review).
var againstRetry = map[Cause]bool{CauseDeclineHard: true, CauseDeclineCancellation: true, CauseDeclineAuth: true, CauseDeclineReview: true}

// RetryAdvised reports whether the record's suggestion allows a retry as it stands: it has a
// retry target and its cause does not say a retry cannot help. A retry against the advice
// needs a note (ErrRetryNoteRequired), and a bulk retry skips the record.
func (r Record) RetryAdvised() bool { return r.Target.Retryable() && !againstRetry[r.Cause] }

// OverrideEffect says what an override of the record changes. Today every override changes
// only the record (its status, outcome and audit): nothing at the provider, no payment of
// ours. For a reconciliation difference it says where the real correction is made.
func (r Record) OverrideEffect() string {
	const only = "An override changes only this record: it closes it with your outcome and note, and changes nothing at the provider or on the payment."
	switch r.Cause {
	case CauseReconAmountMismatch:
		return only + " The amounts stay different: to correct the charge, refund or charge the difference at the provider; the next reconciliation then finds nothing."
	case CauseReconStatusMismatch, CauseReconMissingLocally, CauseReconMissingAtProvider, CauseReconDuplicateCharge, CauseReconStuck,
		CauseReconRefundMissingLocally, CauseReconRefundMissingAtProvider, CauseReconRefundStatusMismatch:
		return only + " The difference stays where it is (at the provider or in twice); reconciliation does not open it again while it remembers it (35 days by default)."
	}
	return only
}
