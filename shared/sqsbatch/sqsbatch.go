package sqsbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/queue"
)

// Func handles one message. An error fails that message alone (FailBatch: the whole batch).
type Func func(ctx context.Context, m queue.Message) error

// RecordFunc handles one Lambda SQS record as it came: for Lambda-side libraries that read
// fields a queue.Message does not carry (idemlambda's key paths over the record's JSON).
type RecordFunc func(ctx context.Context, r events.SQSMessage) error

// Option configures Handler and Records.
type Option func(*config)

type config struct {
	log   *slog.Logger
	after func(ctx context.Context)
}

// WithLogger sets the logger of the failure lines (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithAfterBatch runs f once after every batch, whatever became of its messages.
func WithAfterBatch(f func(ctx context.Context)) Option { return func(c *config) { c.after = f } }

// BatchError fails the whole batch: see FailBatch.
type BatchError struct{ Err error }

func (e *BatchError) Error() string { return "sqsbatch: the whole batch fails: " + e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }

// FailsBatch marks the error for middleware that must pass it on untouched without importing
// this package (deadletter.Retries).
func (e *BatchError) FailsBatch() bool { return true }

// FailBatch wraps err so that the adapter fails the whole batch with it instead of the one
// message: for a cause that no message can get past (a dependency every message needs is
// down), where burning each message's receive count would only move good work towards the
// dead-letter queue.
func FailBatch(err error) error {
	if err == nil {
		return nil
	}
	return &BatchError{Err: err}
}

// Handler returns the Lambda SQS handler (ReportBatchItemFailures) that runs f over each
// message of a batch, as the package documentation says.
func Handler(f Func, opts ...Option) queue.Handler {
	return Records(func(ctx context.Context, r events.SQSMessage) error { return f(ctx, Message(r)) }, opts...)
}

// Records is Handler for a func over the Lambda records themselves.
func Records(f RecordFunc, opts ...Option) queue.Handler {
	c := config{log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if c.after != nil {
			defer c.after(ctx)
		}
		var resp events.SQSEventResponse
		failed := false
		for _, r := range ev.Records {
			if failed && strings.HasSuffix(r.EventSourceARN, ".fifo") {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				continue
			}
			err := c.run(ctx, f, r)
			if err == nil {
				continue
			}
			if be := (*BatchError)(nil); errors.As(err, &be) {
				c.log.WarnContext(ctx, "sqs batch failed; every message will be delivered again", "message_id", r.MessageId,
					"queue", queueName(r.EventSourceARN), "messages", len(ev.Records), "error", be.Err)
				return events.SQSEventResponse{}, err
			}
			c.log.WarnContext(ctx, "sqs message failed; it will be delivered again", "message_id", r.MessageId,
				"queue", queueName(r.EventSourceARN), "receive_count", r.Attributes["ApproximateReceiveCount"], "error", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			failed = true
		}
		return resp, nil
	}
}

// errPanic is what a panicking func's message fails with.
var errPanic = errors.New("sqsbatch: the message handler panicked")

func (c *config) run(ctx context.Context, f RecordFunc, r events.SQSMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.ErrorContext(ctx, "sqs message handler panicked", "message_id", r.MessageId, "panic", fmt.Sprint(p),
				"stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return f(ctx, r)
}

func queueName(arn string) string { return arn[strings.LastIndexByte(arn, ':')+1:] }

// Message is the plain message of a Lambda SQS record: its id, body, String and Number
// message attributes (Binary ones have no string form and are left out), receive count
// (ApproximateReceiveCount; 0 when absent), sent time (SentTimestamp; zero when absent) and
// source queue ARN.
func Message(r events.SQSMessage) queue.Message {
	m := queue.Message{ID: r.MessageId, Body: []byte(r.Body), ReceiptHandle: r.ReceiptHandle, Source: r.EventSourceARN}
	m.ReceiveCount, _ = strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms).UTC()
	}
	for k, a := range r.MessageAttributes {
		if a.StringValue == nil {
			continue
		}
		if m.Attributes == nil {
			m.Attributes = make(map[string]string, len(r.MessageAttributes))
		}
		m.Attributes[k] = *a.StringValue
	}
	return m
}
