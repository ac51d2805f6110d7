// Package sqsbatch is the one Lambda SQS batch adapter: it turns a per-message func over a
// plain queue.Message into the handler Lambda's SQS event source mapping calls with
// ReportBatchItemFailures, and it is the only package a queue consumer needs for aws-lambda-go's
// SQS event types. Domain packages (payments, webhooks/worker, deadletter) write
// func(ctx, queue.Message) error; functions/*/main.go and the local stack (through
// queue.Consumer, Lambda's stand-in) wrap it here, so AWS and local run one code path.
//
// The rules, the same for every consumer:
//   - messages run one at a time, in the batch's order;
//   - a func error fails that message alone: it is logged (message id, queue, receive count,
//     error) and reported in BatchItemFailures, so SQS delivers it again and, past the queue's
//     maxReceiveCount, moves it to the dead-letter queue; the rest of the batch is done;
//   - a panic in a func fails that message alone too (logged with its stack), not the batch
//     as the Lambda runtime would: one poison message must not send its batch mates round the
//     redrive loop with it;
//   - an error wrapped with RetryAfter says when the message can succeed (another holder's
//     lock expires): the message is reported failed as above and, with Batch.Visibility set,
//     its visibility is changed to that wait (at least MinRetryAfter, below the queue's
//     timeout), so it comes back then rather than after the queue's whole visibility timeout;
//     if the change fails it comes back after the timeout;
//   - an error wrapped with FailBatch fails the whole batch: the handler returns it, the
//     remaining messages are not run, and Lambda (or queue.Consumer) leaves every message of
//     the batch for redelivery;
//   - when the invocation's deadline is within Reserve (default 5 s), the message and the rest
//     of the batch are reported failed without running: handed back to the queue while the
//     handler can still answer, so a batch slowed by throttled calls is never cut off by Lambda
//     (which would deliver again the messages it did finish) and never dropped;
//   - on a FIFO queue (the source ARN ends in ".fifo") the messages after a failed one are
//     reported failed without running, so the group's order holds;
//   - Report, when set, is asked before each message's func whether the message's work already
//     ended (then the func does not run) and told its result after; the func is never called
//     from inside it (deadletter.Retries closes an operator's retry this way);
//   - AfterBatch, when set, runs once after every batch, whatever its outcome (the dead-letter sink's
//     open-count metric).
//
// Use:
//
//	w := &worker.Worker{...}
//	lambda.Start((&sqsbatch.Batch{Each: w.Handle, Log: log}).Handle)
package sqsbatch
