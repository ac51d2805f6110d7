package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/store"
)

// change applies fn to the current record and commits the result, conditioned on the version
// it read; when someone else changed the record first it reads again and re-applies fn, which
// sees the new state (a second click sees retrying and does nothing). fn returns false to
// leave the record as it is.
func (t *Records) change(ctx context.Context, id string, fn func(r *Record, now time.Time) (bool, error)) (Record, bool, error) {
	return t.changeWith(ctx, id, nil, fn)
}

// changeWith is change with extra writes committed in the same transaction as the record
// (built from the changed record). A failed condition on an extra write leaves the record as
// it is (changed false, no error): the extra write is a guard that says the change was made.
func (t *Records) changeWith(ctx context.Context, id string, extra func(r Record, now time.Time) ([]store.Write, error),
	fn func(r *Record, now time.Time) (bool, error)) (Record, bool, error) {
	for try := 0; try < maxTries; try++ {
		old, err := t.Get(ctx, id)
		if err != nil {
			return Record{}, false, err
		}
		now := t.now().UTC()
		r := old
		r.Audit = append([]Audit{}, old.Audit...)
		changed, err := fn(&r, now)
		if err != nil || !changed {
			return old, false, err
		}
		r.UpdatedAt, r.Version = now, old.Version+1
		it, err := r.item()
		if err != nil {
			return Record{}, false, err
		}
		var delta int64
		if old.Status == StatusOpen && r.Status != StatusOpen {
			delta = -1
		} else if old.Status != StatusOpen && r.Status == StatusOpen {
			delta = +1
		}
		var ex []store.Write
		if extra != nil {
			if ex, err = extra(r, now); err != nil {
				return old, false, err
			}
		}
		n, err := t.commit(ctx, store.Write{Table: Table, Put: &it, Cond: store.Cond{Kind: store.VersionIs, Version: old.Version}}, delta, now, ex...)
		var ce *store.ConditionError
		if errors.As(err, &ce) && len(ex) > 0 && ce.Index >= extraIndex(delta, 0) {
			return old, false, nil
		}
		if errors.Is(err, store.ErrConditionFailed) || errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return Record{}, false, fmt.Errorf("deadletter: update %s: %w", id, err)
		}
		t.emit(n, now)
		return r, true, nil
	}
	return Record{}, false, fmt.Errorf("%w: %s", ErrBusy, id)
}

func checkNote(note string) error {
	if len(note) > MaxNote || !utf8.ValidString(note) {
		return fmt.Errorf("%w: note too long or not UTF-8", ErrInvalid)
	}
	return nil
}

// Retry moves the record to retrying and commits, in the same transaction, the outbox message
// (KindRetry) that sends its work back to its target with retry id RetryID(id, n), where n is
// the record's next retry number; the outbox relay sends it (RetryFollowOn). A record already
// retrying is left as it is (retried false): a double click, or two operators at once, retries
// once. When the target refuses the retry, the relay returns the record to its previous status
// with a retry_failed audit entry.
func (t *Records) Retry(ctx context.Context, id, actor, note string) (Record, bool, error) {
	return t.RetrySeen(ctx, id, actor, note, -1)
}

// RetrySeen is Retry from an operator who saw the record with seen retries (a form, an API
// body): when the record has had a retry since (a double click whose first click's retry
// already ended, resolved or open again), it is left as it is (retried false), so the work is
// done once however fast the first retry ends. seen < 0 checks nothing.
func (t *Records) RetrySeen(ctx context.Context, id, actor, note string, seen int) (Record, bool, error) {
	if err := checkNote(note); err != nil {
		return Record{}, false, err
	}
	var from Status
	// The retry to send, in the transaction of the move to retrying: committed together or
	// not at all, so no crash leaves the record retrying with nothing sent.
	extra := func(r Record, now time.Time) ([]store.Write, error) {
		w, err := retryMessage(r, from, now)
		return []store.Write{w}, err
	}
	r, retried, err := t.changeWith(ctx, id, extra, func(r *Record, now time.Time) (bool, error) {
		if seen >= 0 && r.Retries != seen {
			return false, nil // retried since the operator looked: this is a second click
		}
		switch r.Status {
		case StatusRetrying:
			return false, nil
		case StatusResolved, StatusOverridden:
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		if !r.Target.Retryable() {
			return false, fmt.Errorf("%w: %s", ErrNotRetryable, r.ID)
		}
		if !r.RetryAdvised() && strings.TrimSpace(note) == "" {
			return false, fmt.Errorf("%w: %s is %s", ErrRetryNoteRequired, r.ID, r.Cause)
		}
		from = r.Status
		r.Retries++
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: ActionRetry, Note: note, From: r.Status,
			To: StatusRetrying, RetryID: RetryID(r.ID, r.Retries)})
		r.Status = StatusRetrying
		return true, nil
	})
	if err != nil || !retried {
		return r, false, err
	}
	t.log().InfoContext(ctx, "dead-letter retry committed for the relay", "record", r.ID, "retry_id", RetryID(r.ID, r.Retries), "actor", actor)
	return r, true, nil
}

// requeueTarget is the target a Requeuer gets for the record's current retry.
func requeueTarget(r Record) Target {
	tgt := r.Target
	tgt.Retry, tgt.RecordID = r.Retries, r.ID
	return tgt
}

// retryNotSent returns the record from retry n back to from, with a retry_failed audit entry:
// the relay could not hand its retry to the target. A record no longer
// in that retry (it ended, or was retried again) is left as it is.
func (t *Records) retryNotSent(ctx context.Context, id string, n int, from Status) (Record, error) {
	retryID := RetryID(id, n)
	back, _, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		if r.Status != StatusRetrying || r.Retries != n {
			return false, nil
		}
		r.Audit = append(r.Audit, Audit{At: now, Actor: "system", Action: ActionRetryError,
			Note: "the retry could not be sent; try again", From: StatusRetrying, To: from, RetryID: retryID})
		r.Status = from
		return true, nil
	})
	return back, err
}

// Override closes the record with a manual result (the API's "outcome"). Both result and
// note are required.
func (t *Records) Override(ctx context.Context, id, actor, result, note string) (Record, error) {
	result, note = strings.TrimSpace(result), strings.TrimSpace(note)
	if result == "" || note == "" {
		return Record{}, ErrNoteRequired
	}
	if len(result) > MaxResult || !utf8.ValidString(result) {
		return Record{}, fmt.Errorf("%w: outcome too long or not UTF-8", ErrInvalid)
	}
	if err := checkNote(note); err != nil {
		return Record{}, err
	}
	r, _, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		if r.Status == StatusResolved || r.Status == StatusOverridden {
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: ActionOverride, Note: note, Result: result, From: r.Status, To: StatusOverridden})
		r.Status, r.Result = StatusOverridden, result
		return true, nil
	})
	return r, err
}

// MarkResolved closes the record as resolved: the work is done, by a retry or by hand. (To
// resolve, in this code, is what the payment resolver does to an unknown outcome; a record is
// marked resolved.)
func (t *Records) MarkResolved(ctx context.Context, id, actor, note string) (Record, error) {
	return t.closeAs(ctx, id, actor, note, ActionResolve, StatusResolved)
}

// Ignore sets the record aside: nothing will be done. An ignored record can still be retried
// or resolved later.
func (t *Records) Ignore(ctx context.Context, id, actor, note string) (Record, error) {
	return t.closeAs(ctx, id, actor, note, ActionIgnore, StatusIgnored)
}

func (t *Records) closeAs(ctx context.Context, id, actor, note, action string, to Status) (Record, error) {
	if err := checkNote(strings.TrimSpace(note)); err != nil {
		return Record{}, err
	}
	r, _, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		switch {
		case r.Status == to:
			return false, nil // a repeated click: nothing to do, nothing to audit
		case r.Status == StatusResolved || r.Status == StatusOverridden:
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: action, Note: strings.TrimSpace(note), From: r.Status, To: to})
		r.Status = to
		return true, nil
	})
	return r, err
}

// BulkResult counts what a BulkRetry did.
type BulkResult struct {
	Matched int      `json:"matched"`
	Retried int      `json:"retried"`
	Skipped int      `json:"skipped"`
	Failed  int      `json:"failed"`
	IDs     []string `json:"retried_ids"`
}

// MaxBulk bounds the records one BulkRetry touches.
const MaxBulk = 500

// BulkRetry retries every record matching f (open by default), up to MaxBulk. Each retry is
// audited on its record like a single retry; records that cannot be retried, and those whose
// suggestion says not to (Record.RetryAdvised), are skipped.
func (t *Records) BulkRetry(ctx context.Context, f Filter, actor, note string) (BulkResult, error) {
	if f.Status == "" {
		f.Status = StatusOpen
	}
	if f.Status != StatusOpen && f.Status != StatusIgnored {
		return BulkResult{}, fmt.Errorf("%w: bulk retry works on open or ignored records", ErrInvalid)
	}
	if note == "" {
		note = "bulk retry"
	}
	var ids []string
	advised := map[string]bool{}
	f.Cursor, f.Limit = "", MaxLimit
	for len(ids) < MaxBulk {
		page, err := t.List(ctx, f)
		if err != nil {
			return BulkResult{}, err
		}
		for _, r := range page.Records {
			if len(ids) < MaxBulk {
				ids = append(ids, r.ID)
				advised[r.ID] = r.RetryAdvised()
			}
		}
		if page.Cursor == "" {
			break
		}
		f.Cursor = page.Cursor
	}
	res := BulkResult{Matched: len(ids), IDs: []string{}}
	for _, id := range ids {
		if !advised[id] {
			// Its own suggestion says not to retry: only a person, with a note, retries it.
			res.Skipped++
			continue
		}
		_, retried, err := t.Retry(ctx, id, actor, note)
		switch {
		case err == nil && retried:
			res.Retried++
			res.IDs = append(res.IDs, id)
		case err == nil, errors.Is(err, ErrNotRetryable), errors.Is(err, ErrClosed):
			res.Skipped++
		default:
			res.Failed++
			t.log().ErrorContext(ctx, "bulk retry failed for a record", "record", id, "err", err)
		}
	}
	return res, nil
}
