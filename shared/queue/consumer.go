package queue

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Handler is a Lambda SQS handler with ReportBatchItemFailures: it returns the ids of the
// messages that failed, or an error that fails the whole batch. a sqsbatch.Batch is one
// from a per-message func; every consumer of twice is built that way.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Receiver is what a Consumer needs of a queue.
type Receiver interface {
	Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Message, error)
	Delete(ctx context.Context, receipt string) error
}

var _ Receiver = Queue(nil)

// BatchDeleter is implemented by queues that delete many messages in one request (SQS
// DeleteMessageBatch; one commit in the local queue). The Consumer uses it when it is there, as
// Lambda deletes a batch's successes together.
type BatchDeleter interface {
	// DeleteBatch deletes up to MaxBatch messages and returns one error per receipt (nil for
	// each deleted one), or a single error when the request failed as a whole.
	DeleteBatch(ctx context.Context, receipts []string) ([]error, error)
}

// Consumer runs a Handler over a queue the way Lambda's SQS event source mapping does: it
// receives a batch, calls the handler, deletes the messages the handler did not report as
// failed, and leaves the failed ones to reappear after the visibility timeout (and, past the
// queue's maxReceiveCount, to move to its dead-letter queue). A handler error, a panic, or a
// failure id that names no message in the batch fails the whole batch, as in Lambda.
type Consumer struct {
	Queue   Receiver
	Handler Handler
	// BatchSize is the most messages per handler call (1 to 10; default 10).
	BatchSize int
	// Visibility is how long a received batch stays hidden (default 30 s): the Lambda timeout.
	Visibility time.Duration
	// Wait is the long-poll wait of each receive (default 20 s).
	Wait time.Duration
	// Concurrency is the number of batches in flight at once (default 1).
	Concurrency int
	// SourceARN and Region fill the event's eventSourceARN and awsRegion.
	SourceARN string
	Region    string
	// ErrorPause is how long a poller waits after a failed receive before the next (default 1 s).
	ErrorPause time.Duration
	Log        *slog.Logger
}

// Run polls until ctx ends, with Concurrency pollers, and returns nil then. It returns early
// with the error if the queue is closed.
func (c *Consumer) Run(ctx context.Context) error {
	n := c.Concurrency
	if n <= 0 {
		n = 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.Poll(ctx)
				if err == nil || ctx.Err() != nil {
					continue
				}
				if errors.Is(err, ErrClosed) {
					cancel(err)
					return
				}
				c.log().Warn("queue receive failed", "queue", c.SourceARN, "err", err)
				pause(ctx, c.ErrorPause)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// BatchResult says what became of one polled batch.
type BatchResult struct {
	Received int
	Deleted  int
	// Failed counts the messages left for redelivery.
	Failed int
}

// Poll receives one batch, runs the handler over it and deletes the successes. An error means
// the receive failed; handler failures are not errors of Poll, they are Failed messages.
func (c *Consumer) Poll(ctx context.Context) (BatchResult, error) {
	size := c.BatchSize
	if size <= 0 || size > MaxBatch {
		size = MaxBatch
	}
	vis := c.Visibility
	if vis <= 0 {
		vis = 30 * time.Second
	}
	wait := c.Wait
	if wait <= 0 {
		wait = MaxWait
	}
	msgs, err := c.Queue.Receive(ctx, size, vis, wait)
	if err != nil || len(msgs) == 0 {
		return BatchResult{}, err
	}
	res := BatchResult{Received: len(msgs)}
	failed := c.handle(ctx, msgs)
	var done []Message
	for _, m := range msgs {
		if failed[m.ID] {
			res.Failed++
			continue
		}
		done = append(done, m)
	}
	// Deletes outlive a cancelled ctx: the work is done, and a lost delete means a redelivery.
	errs := c.delete(context.WithoutCancel(ctx), done)
	for i, m := range done {
		// A message whose delete fails comes back after its visibility timeout: at-least-once,
		// which the handlers are written for.
		if errs[i] != nil {
			c.log().Warn("queue delete failed", "queue", c.SourceARN, "message_id", m.ID, "err", errs[i])
			res.Failed++
			continue
		}
		res.Deleted++
	}
	return res, nil
}

func (c *Consumer) delete(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	if bd, ok := c.Queue.(BatchDeleter); ok && len(msgs) > 1 {
		receipts := make([]string, len(msgs))
		for i, m := range msgs {
			receipts[i] = m.ReceiptHandle
		}
		got, err := bd.DeleteBatch(ctx, receipts)
		if err == nil && len(got) == len(msgs) {
			return got
		}
		if err == nil {
			err = fmt.Errorf("queue: DeleteBatch returned %d results for %d receipts", len(got), len(msgs))
		}
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, m := range msgs {
		errs[i] = c.Queue.Delete(ctx, m.ReceiptHandle)
	}
	return errs
}

// handle runs the handler and returns the ids of the messages that failed.
func (c *Consumer) handle(ctx context.Context, msgs []Message) (failed map[string]bool) {
	all := func(reason string, err error) map[string]bool {
		c.log().Warn("queue batch failed", "queue", c.SourceARN, "reason", reason, "messages", len(msgs), "err", err)
		f := make(map[string]bool, len(msgs))
		for _, m := range msgs {
			f[m.ID] = true
		}
		return f
	}
	ev := Event(c.SourceARN, c.Region, msgs)
	resp, err := c.call(ctx, ev)
	if err != nil {
		return all("handler error", err)
	}
	failed = make(map[string]bool, len(resp.BatchItemFailures))
	ids := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		ids[m.ID] = true
	}
	for _, f := range resp.BatchItemFailures {
		// Lambda treats an empty or unknown identifier as a failure of the whole batch.
		if !ids[f.ItemIdentifier] {
			return all("unknown item identifier", fmt.Errorf("%q", f.ItemIdentifier))
		}
		failed[f.ItemIdentifier] = true
	}
	if len(failed) > 0 {
		c.log().Info("queue messages failed", "queue", c.SourceARN, "failed", len(failed), "messages", len(msgs))
	}
	return failed
}

func (c *Consumer) call(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return c.Handler(ctx, ev)
}

func (c *Consumer) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// Event builds the SQS event Lambda would deliver for msgs.
func Event(sourceARN, region string, msgs []Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		sum := md5.Sum(m.Body)
		rec := events.SQSMessage{
			MessageId:     m.ID,
			ReceiptHandle: m.ReceiptHandle,
			Body:          string(m.Body),
			Md5OfBody:     hex.EncodeToString(sum[:]),
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(m.ReceiveCount),
				"SentTimestamp":           strconv.FormatInt(m.SentAt.UnixMilli(), 10),
			},
			EventSource:    "aws:sqs",
			EventSourceARN: sourceARN,
			AWSRegion:      region,
		}
		if len(m.Attributes) > 0 {
			rec.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.Attributes))
			for k, v := range m.Attributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: &v, DataType: "String"}
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}
