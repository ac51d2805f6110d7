// Package sqsqueue is queue.Queue on Amazon SQS (aws-sdk-go-v2 service/sqs), for a standard
// queue whose URL is given.
//
// Durations are rounded up to whole seconds, SQS's unit. Messages carry String message
// attributes; receives ask for every message attribute and for the ApproximateReceiveCount and
// SentTimestamp system attributes. Redrive is the queue's RedrivePolicy attribute, set by the
// template (or, in tests, by CreateQueue). SQS errors are wrapped around the queue sentinels
// (ReceiptHandleIsInvalid as queue.ErrReceiptInvalid, QueueDoesNotExist as queue.ErrNoQueue,
// InvalidParameterValue as queue.ErrInvalid).
//
// The package's tests run the shared suite against moto (TWICE_TEST_MOTO_ENDPOINT), which keeps
// every receipt handle a message ever had valid: there a stale receipt deletes.
package sqsqueue
