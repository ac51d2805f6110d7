// Package queue is the contract between twice's code and the message queues it runs on: SQS
// standard queues in AWS (package shared/sqsqueue) and a durable bbolt queue locally (package
// infra/localqueue).
//
// The semantics are SQS's: delivery is at least once; a received message stays hidden for a
// visibility timeout and comes back, with its ReceiveCount one higher, unless it is deleted;
// ChangeVisibility hides it for longer (a backoff) or gives it back at once; a queue may redrive
// a message to its dead-letter queue on the receive that would exceed its maxReceiveCount.
// CheckSend and CheckReceive hold both implementations to SQS's limits, so what works locally
// works in AWS.
//
// Consumer runs a Lambda SQS handler (func(ctx, events.SQSEvent) (events.SQSEventResponse,
// error)) over a queue exactly as Lambda's event source mapping with ReportBatchItemFailures
// does: successes are deleted, reported failures are left for redelivery, and a handler error,
// panic or unknown item identifier fails the whole batch. The local stack therefore runs the
// very handlers that AWS runs: package sqsbatch builds every consumer's handler from a
// per-message func over Message. infra/localqueue's ExampleQueue_consumer runs a handler that
// fails one message over the local queue.
//
// Every implementation passes the shared suite in package queue/queuetest.
package queue
