// Package resolvequeue is the resolve queue's consumer: the per-message func that sqsbatch runs
// for the payment-resolver function (and the local stack's resolve consumer). Each message, a
// JSON payments.ResolveJob, runs payments.Service.ResolveMessage under its own idempotency key
// (its message id, idemlambda.Message), so a redelivered message whose job completed is not run
// again. A job that fails (or does not decode) fails this message alone, so SQS retries it and,
// after the queue's maxReceiveCount, moves it to the dead-letter queue. A job whose key another
// caller holds (a client's retry resolving it, another delivery) fails with
// sqsbatch.RetryAfter: with the batch's Visibility set it comes back when the key can next be
// taken (ComeBack), not after the queue's whole visibility timeout.
//
// It is apart from package payments because idemlambda selects the key with a JSONPath over the
// message's Lambda record: only the resolver links the JSONPath library.
//
//	b := &sqsbatch.Batch{Each: resolvequeue.Consumer{Service: svc}.Handle, Report: retries,
//		Visibility: resolveQueue, VisibilityTimeout: 180 * time.Second}
package resolvequeue
