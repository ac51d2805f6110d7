// Package deadletter is the dead-letter table: work twice could not finish, kept as records an
// operator can work, not as log lines.
//
// A Record holds the source (webhook, resolve, recovery, reconciliation), the cause of the
// failure, the full original payload, every try, an error in plain language with a
// suggested action (Explain, one text per cause, built only from Facts so that no internal
// error text reaches an operator), the status (open, retrying, resolved, overridden,
// ignored), the retry target and an audit trail of every action.
//
// The record id derives from the source's own key (RecordID), and Records.Open is a conditional
// put, so the same dead work opened twice is one record. Operator actions (Retry, Override,
// Resolve, Ignore, BulkRetry) read the record and write it back conditioned on its version;
// a loser re-reads and re-decides. Retry moves the record to retrying and commits, in the
// same transaction, an outbox message (KindRetry) for RetryID(record, retry number): a second
// click sees retrying and does nothing, so a double click retries once. The outbox relay's
// Records sends it with its Requeuer (RetryFollowOn), once, and returns the record to its
// previous status with a retry_failed audit entry when the target refuses or RelayAttempts
// attempts fail. A retried message that dies again reopens its record. The Requeuer is
// ByTarget, one per target kind: QueueRequeuer here, and recovery.Requeuer and recon.Requeuer
// with the producers of those records, which also own what opens them
// (recovery.DeadLetterRecords, recon.DeadLetterRecords, payments.DisputeFollowOns); this package
// imports none of them. A retry target that needs a Records itself is built on one first, and
// the relay's Records after it (a second Records literal on the same store, with the Requeuer).
//
// Every retry closes its loop (loop.go): the work's consumer ends it through Loop. Beside each
// queue consumer, in its batch (sqsbatch.Batch's Report), Retries skips a retry id that already
// ended and reports the result the consumer returned; it never calls the consumer itself; recovery's steps report a charge-now's result through recovery.DeadLetterRecords;
// RetrySucceeded moves the record to resolved and RetryFailed back to open with the try
// appended, each with a ledger item for the retry id in the same conditional transaction.
// Record.Actions lists only the actions that apply; Record.OverrideEffect says what an
// override changes (only the record).
//
// Sink.Handle is the deadletter-sink function's per-message func (run through sqsbatch): one record per dead queue.Message, the source from the DLQ's name, a message
// that cannot be stored failing alone. FromRecovery builds the record for a recovery dead letter.
//
// The open count lives in a counter item updated in the same transaction as each status
// change, with a per-hour snapshot for the console's chart (OpenHistory). EMF writes the count
// as a CloudWatch metric (namespace Twice, metric DeadLetterOpen, dimension Stage) in
// Embedded Metric Format, whenever it changes and after each sink batch (Sink.ReportOpen); the alarm watches its
// growth over several periods, never single failures.
package deadletter
