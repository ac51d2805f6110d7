// Package worker is the webhook queue's consumer: it decodes each verified delivery and hands
// its event to payments.Applier, which applies it exactly once and in order (dedupe on the
// provider's event id and on (object, type, version), the ordering guard, the payment's new
// state and its follow-on work, in one transaction). Worker.Handle takes one plain
// queue.Message; the webhook-worker function runs it through sqsbatch, which reports each
// failed message alone (ReportBatchItemFailures): the worker never fails a whole batch.
package worker
