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

// Reporter hears each message's result beside the func, never around it: the batch asks it,
// then runs the func, then tells it, so the func is never called from inside it
// (deadletter.Retries: a message an operator retried closes its dead-letter record).
//
// Ended is asked first: true means the message's work already ended (a redelivery), and the
// message succeeds without the func running; an error fails the message. Report is told the
// func's result (nil: success) and returns the message's. It is not told a panic or an error
// that fails the whole batch (FailBatch): those leave the message for redelivery as they would
// without it.
type Reporter interface {
	Ended(ctx context.Context, m queue.Message) (bool, error)
	Report(ctx context.Context, m queue.Message, err error) error
}

// Batch is the Lambda SQS handler (ReportBatchItemFailures) that runs a func over each message
// of a batch, as the package documentation says. Set Each, or EachRecord for a func over the
// Lambda records themselves, and Report to hear each message's result; Handle runs it.
//
//	lambda.Start((&sqsbatch.Batch{Each: worker.Handle, Report: retries, Log: log}).Handle)
type Batch struct {
	Each       Func
	EachRecord RecordFunc
	// Report, when set, is asked before and told after each message's func (Reporter).
	Report Reporter
	// Log receives the failure lines (default slog.Default()).
	Log *slog.Logger
	// AfterBatch, when set, runs once after every batch, whatever became of its messages.
	AfterBatch func(ctx context.Context)
	// Reserve is the time a message needs before the invocation's deadline (default
	// DefaultReserve): with less left, the message and the rest of the batch are handed back
	// as failures without running, so a batch slowed by throttled calls answers before Lambda
	// cuts it off, and the messages it did finish are not delivered again.
	Reserve time.Duration
	// Now is the clock read against the deadline (default time.Now).
	Now func() time.Time
	// Visibility, when set, is the queue the batch comes from: a message that fails with a
	// RetryAfter error has its visibility changed to that wait, so it comes back then instead of
	// after the queue's whole visibility timeout.
	Visibility Visibility
	// VisibilityTimeout is the queue's visibility timeout: the longest wait a RetryAfter gets.
	// A wait at or past it changes nothing (the message comes back after the timeout anyway).
	// Zero leaves waits uncapped, up to queue.MaxVisibility.
	VisibilityTimeout time.Duration
}

// DefaultReserve is Batch.Reserve's default: the AWS clients' longest retry wait and a call
// (lambdaenv.RetryReserve), with room for a provider call.
const DefaultReserve = 5 * time.Second

// deadlineNear reports whether ctx's deadline is within the reserve.
func (b *Batch) deadlineNear(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	now, reserve := time.Now, b.Reserve
	if b.Now != nil {
		now = b.Now
	}
	if reserve <= 0 {
		reserve = DefaultReserve
	}
	return dl.Sub(now()) < reserve
}

// Visibility is the one queue call the batch makes itself: queue.Queue (SQS, the local queue)
// satisfies it.
type Visibility interface {
	ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error
}

// MinRetryAfter is the shortest wait a RetryAfter gets: a message never comes straight back.
const MinRetryAfter = time.Second

// RetryAfterError fails one message and says when it may succeed: see RetryAfter.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err, a message's failure, with when the message should be tried again: the
// moment the cause can be gone (another holder's lock expires). The batch reports the message
// failed, as for any error, and with Batch.Visibility set also changes the message's visibility
// to d, bounded by MinRetryAfter and Batch.VisibilityTimeout: SQS delivers it again then,
// rather than after the queue's whole timeout. If the change fails the message still comes back
// after the timeout: nothing is lost, only later.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, After: d}
}

func (b *Batch) log() *slog.Logger {
	if b.Log != nil {
		return b.Log
	}
	return slog.Default()
}

// errNoFunc fails a batch whose Batch has neither Each nor EachRecord.
var errNoFunc = errors.New("sqsbatch: Batch has no Each or EachRecord func")

// BatchError fails the whole batch: see FailBatch.
type BatchError struct{ Err error }

func (e *BatchError) Error() string { return "sqsbatch: the whole batch fails: " + e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }

// FailsBatch marks the error for a caller that must tell it apart without importing this
// package (a consumer's own tests).
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

var _ queue.Handler = (*Batch)(nil).Handle

// Handle runs the batch's func over each message of ev and reports the failed ones.
func (b *Batch) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	f := b.EachRecord
	if b.Each != nil {
		f = func(ctx context.Context, r events.SQSMessage) error { return b.Each(ctx, Message(r)) }
	}
	if f == nil {
		return events.SQSEventResponse{}, errNoFunc
	}
	if b.Report != nil {
		f = reported(f, b.Report)
	}
	if b.AfterBatch != nil {
		defer b.AfterBatch(ctx)
	}
	log := b.log()
	var resp events.SQSEventResponse
	failed, near := false, false
	for _, r := range ev.Records {
		if failed && strings.HasSuffix(r.EventSourceARN, ".fifo") {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			continue
		}
		if near = near || b.deadlineNear(ctx); near {
			log.WarnContext(ctx, "sqs message handed back: the invocation's deadline is near", "message_id", r.MessageId,
				"queue", queueName(r.EventSourceARN))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			failed = true
			continue
		}
		err := run(ctx, log, f, r)
		if err == nil {
			continue
		}
		if be := (*BatchError)(nil); errors.As(err, &be) {
			log.WarnContext(ctx, "sqs batch failed; every message will be delivered again", "message_id", r.MessageId,
				"queue", queueName(r.EventSourceARN), "messages", len(ev.Records), "error", be.Err)
			return events.SQSEventResponse{}, err
		}
		log.WarnContext(ctx, "sqs message failed; it will be delivered again", "message_id", r.MessageId,
			"queue", queueName(r.EventSourceARN), "receive_count", r.Attributes["ApproximateReceiveCount"], "error", err)
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		failed = true
		b.comeBack(ctx, log, r, err)
	}
	return resp, nil
}

// comeBack changes the visibility of a failed message whose error says when to try it again.
// Its failure is logged and otherwise ignored: the message comes back after the queue's
// visibility timeout instead.
func (b *Batch) comeBack(ctx context.Context, log *slog.Logger, r events.SQSMessage, err error) {
	ra := (*RetryAfterError)(nil)
	if b.Visibility == nil || !errors.As(err, &ra) || r.ReceiptHandle == "" {
		return
	}
	d := max(ra.After, MinRetryAfter)
	ceiling := b.VisibilityTimeout
	if ceiling <= 0 {
		ceiling = queue.MaxVisibility
	}
	if d >= ceiling {
		return
	}
	if cerr := b.Visibility.ChangeVisibility(ctx, r.ReceiptHandle, d); cerr != nil {
		log.WarnContext(ctx, "sqs message visibility not changed; it comes back after the queue's timeout", "message_id", r.MessageId,
			"queue", queueName(r.EventSourceARN), "retry_after", d, "error", cerr)
	}
}

// reported runs f between rep's two calls. A panic in f passes through (run recovers it) and an
// error that fails the batch is returned as it is: neither is reported.
func reported(f RecordFunc, rep Reporter) RecordFunc {
	return func(ctx context.Context, r events.SQSMessage) error {
		m := Message(r)
		ended, err := rep.Ended(ctx, m)
		if err != nil || ended {
			return err
		}
		err = f(ctx, r)
		if be := (*BatchError)(nil); errors.As(err, &be) {
			return err
		}
		return rep.Report(ctx, m, err)
	}
}

// errPanic is what a panicking func's message fails with.
var errPanic = errors.New("sqsbatch: the message handler panicked")

func run(ctx context.Context, log *slog.Logger, f RecordFunc, r events.SQSMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "sqs message handler panicked", "message_id", r.MessageId, "panic", fmt.Sprint(p),
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
