// Package worker applies verified webhook deliveries exactly once and in order: it dedupes on the
// provider's event id and on (object, type, version), ignores an event older than the version
// already applied to its payment, and commits the dedupe records and the payment's new state in
// one transaction, so a crash between them cannot happen. Worker.Handle takes one plain
// queue.Message; the webhook-worker function runs it through sqsbatch, which reports each
// failed message alone (ReportBatchItemFailures): the worker never fails a whole batch.
package worker
