package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// KindRetry is the outbox kind of an operator's retry: committed with the record's move to
// retrying, sent to its target by the relay (RetryFollowOn).
const KindRetry = "retry_dead_letter"

// RelayAttempts is how many times the relay tries to send one retry before the record goes
// back to the operator (its previous status, with a retry_failed audit entry). A target that
// refuses the retry for good (ErrNotRetryable) sends it back at the first attempt. The count
// is the message's (outbox.Message.Attempts, kept by the relay's reschedule): in AWS the
// stream's own retries of a batch do not add to it, the sweep's do.
const RelayAttempts = 3

// RetryMessageID is the outbox id of retry retryID: one message per (record, retry number),
// so a repeated commit of the same retry writes the same message.
func RetryMessageID(retryID string) string { return "dlretry#" + retryID }

// retryPayload is a KindRetry message: which retry of which record, and the status to return
// the record to if the retry cannot be sent.
type retryPayload struct {
	RecordID string `json:"record_id"`
	Retry    int    `json:"retry"`
	From     Status `json:"from"`
}

func retryMessage(r Record, from Status, now time.Time) (store.Write, error) {
	return outbox.New(KindRetry, RetryMessageID(RetryID(r.ID, r.Retries)),
		retryPayload{RecordID: r.ID, Retry: r.Retries, From: from}, now)
}

// sentPK marks a retry the relay handed to its target, so that a second delivery of its
// message sends nothing (the relay may die between the send and its delete).
func sentPK(retryID string) string { return "sent#" + retryID }

// RetryFollowOn is the outbox relay's handler of KindRetry, on a Records with the Requeuer. It
// sends the retry the message names if the record is still retrying under it: a record whose
// retry ended meanwhile, or that was retried again, needs nothing, and a retry already sent
// is not sent again, so delivering a message twice is harmless. When the target refuses the
// retry for good (ErrNotRetryable) or the RelayAttempts-th attempt fails, the record returns
// to its previous status with a retry_failed audit entry and the message is done; a failure before that is returned, and the relay tries again
// with backoff. Either way the retry's loop closes: the target's consumer resolves or
// reopens the record (Retries, recovery.DeadLetterRecords), or the operator has it back.
func (t *Records) RetryFollowOn() outbox.Handler {
	return func(ctx context.Context, m outbox.Message) error {
		var p retryPayload
		if err := json.Unmarshal(m.Payload, &p); err != nil || p.RecordID == "" || p.Retry < 1 {
			return fmt.Errorf("deadletter: retry message %s: %w (%v)", m.ID, ErrInvalid, err)
		}
		if t.Requeuer == nil {
			return fmt.Errorf("%w: no requeuer configured for the relay", ErrRequeue)
		}
		if p.From == "" {
			p.From = StatusOpen
		}
		r, err := t.Get(ctx, p.RecordID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		retryID := RetryID(r.ID, p.Retry)
		if r.Status != StatusRetrying || r.Retries != p.Retry {
			return nil // ended, or retried again (its own message sends that one)
		}
		_, err = t.Store.Get(ctx, Table, sentPK(retryID), "")
		switch {
		case err == nil:
			return nil // sent already: its consumer closes the loop
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("deadletter: read %s: %w", sentPK(retryID), err)
		}
		err = t.Requeuer.Requeue(ctx, requeueTarget(r), retryID)
		if err == nil {
			now := t.now().UTC()
			mark := store.Item{PK: sentPK(retryID), Doc: []byte(`{}`), ExpiresAt: now.Add(RetryLedgerRetention).Unix()}
			if perr := t.Store.Put(ctx, Table, mark, store.Cond{Kind: store.Always}); perr != nil {
				// Sent: a second delivery would send it again, and its consumer dedupes on the
				// retry id (Retries).
				t.log().WarnContext(ctx, "dead-letter retry sent but not marked", "record", r.ID, "retry_id", retryID, "err", perr)
			}
			t.log().InfoContext(ctx, "dead-letter retried", "record", r.ID, "retry_id", retryID, "attempt", m.Attempts+1)
			return nil
		}
		if !errors.Is(err, ErrNotRetryable) && m.Attempts+1 < RelayAttempts {
			return err
		}
		t.log().ErrorContext(ctx, "dead-letter retry not sent; the record goes back", "record", r.ID, "retry_id", retryID,
			"attempt", m.Attempts+1, "err", err)
		if _, berr := t.retryNotSent(ctx, r.ID, p.Retry, p.From); berr != nil {
			return fmt.Errorf("deadletter: return %s from its unsent retry: %w", r.ID, berr)
		}
		return nil
	}
}
