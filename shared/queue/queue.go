package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits of SQS standard queues. The local queue enforces the same ones, so a message that
// goes through locally also goes through in AWS.
const (
	MaxBatch         = 10
	MaxDelay         = 15 * time.Minute
	MaxVisibility    = 12 * time.Hour
	MaxWait          = 20 * time.Second
	MaxBodyBytes     = 256 * 1024
	MaxAttributes    = 10
	maxAttributeName = 256
)

// Message is one received message.
type Message struct {
	ID   string
	Body []byte
	// Attributes are the sender's message attributes (SQS String attributes).
	Attributes map[string]string
	// ReceiptHandle names this receive of the message; Delete and ChangeVisibility take it.
	ReceiptHandle string
	// ReceiveCount is SQS's ApproximateReceiveCount: 1 on the first delivery.
	ReceiveCount int
	SentAt       time.Time
	// Source is the ARN of the queue the message was delivered from (Lambda's eventSourceARN):
	// set for the per-message funcs of package sqsbatch, empty from Receive.
	Source string
}

// SendOptions are the optional parts of a Send.
//
// There is no deduplication id: standard queues reject one (it is a FIFO-queue parameter) and
// deliver at least once anyway, so consumers dedupe on the event id.
type SendOptions struct {
	// Delay keeps the message invisible for this long after Send (0 to MaxDelay).
	Delay      time.Duration
	Attributes map[string]string
}

// Queue is the contract of an SQS standard queue: at-least-once delivery, a visibility timeout
// per receive, and redrive to a dead-letter queue after the queue's maxReceiveCount (configured
// on the queue, not per call: SQS keeps it in the RedrivePolicy attribute).
type Queue interface {
	// Send enqueues body and returns the message id.
	Send(ctx context.Context, body []byte, opts SendOptions) (id string, err error)
	// Receive returns up to max (1 to MaxBatch) visible messages and hides them for visibility.
	// With none visible it waits up to wait (0 to MaxWait) for one to arrive; it may return
	// fewer than max, or none, and it returns early when ctx ends. A message already received
	// maxReceiveCount times moves to the dead-letter queue instead of being returned.
	Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Message, error)
	// Delete removes the message received with receipt. Deleting a message that is already gone
	// is not an error. Whether a stale receipt (one from an earlier receive of a message that was
	// received again) deletes depends on the implementation: the local queue refuses with
	// ErrStaleReceipt; moto deletes, because it accepts every receipt a message ever had.
	Delete(ctx context.Context, receipt string) error
	// ChangeVisibility hides the message received with receipt for d from now (0 makes it
	// visible at once): how a consumer backs off a failed message.
	ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error
}

// Sentinel errors. Implementations wrap their own errors around these.
var (
	// ErrInvalid means the request itself is malformed: a batch size, delay, visibility or wait
	// out of range, a body or attributes SQS would refuse.
	ErrInvalid = errors.New("queue: invalid request")
	// ErrReceiptInvalid means the receipt handle is not one this queue issued, or its message
	// is no longer in flight (ChangeVisibility on a deleted message).
	ErrReceiptInvalid = errors.New("queue: receipt handle invalid")
	// ErrStaleReceipt means the message was received again after this receipt was issued; the
	// newer receiver owns it now. It matches ErrReceiptInvalid too.
	ErrStaleReceipt = &receiptError{"queue: receipt handle is stale"}
	// ErrNoQueue means the queue does not exist.
	ErrNoQueue = errors.New("queue: no such queue")
	// ErrClosed means the queue was closed.
	ErrClosed = errors.New("queue: closed")
)

type receiptError struct{ msg string }

func (e *receiptError) Error() string { return e.msg }

// Is makes a stale receipt also an invalid one, for callers that do not care which.
func (e *receiptError) Is(target error) bool { return target == ErrReceiptInvalid }

// CheckSend reports whether SQS would accept this message: a non-empty body of at most
// MaxBodyBytes of the characters SQS allows, a delay within range, and at most MaxAttributes
// attributes with non-empty names and values. Both implementations call it first.
func CheckSend(body []byte, opts SendOptions) error {
	if len(body) == 0 || len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: body of %d bytes (1 to %d)", ErrInvalid, len(body), MaxBodyBytes)
	}
	if !ValidText(string(body)) {
		return fmt.Errorf("%w: body has characters SQS does not allow", ErrInvalid)
	}
	if opts.Delay < 0 || opts.Delay > MaxDelay {
		return fmt.Errorf("%w: delay %v (0 to %v)", ErrInvalid, opts.Delay, MaxDelay)
	}
	if len(opts.Attributes) > MaxAttributes {
		return fmt.Errorf("%w: %d attributes (at most %d)", ErrInvalid, len(opts.Attributes), MaxAttributes)
	}
	size := len(body)
	for k, v := range opts.Attributes {
		if k == "" || len(k) > maxAttributeName || v == "" || !ValidText(k) || !ValidText(v) {
			return fmt.Errorf("%w: attribute %q", ErrInvalid, k)
		}
		size += len(k) + len(v) + len("String")
	}
	// SQS counts attributes towards the message size.
	if size > MaxBodyBytes {
		return fmt.Errorf("%w: message of %d bytes with attributes (at most %d)", ErrInvalid, size, MaxBodyBytes)
	}
	return nil
}

// CheckReceive reports whether the receive parameters are within SQS's ranges.
func CheckReceive(max int, visibility, wait time.Duration) error {
	if max < 1 || max > MaxBatch {
		return fmt.Errorf("%w: max %d (1 to %d)", ErrInvalid, max, MaxBatch)
	}
	if err := CheckVisibility(visibility); err != nil {
		return err
	}
	if wait < 0 || wait > MaxWait {
		return fmt.Errorf("%w: wait %v (0 to %v)", ErrInvalid, wait, MaxWait)
	}
	return nil
}

// CheckVisibility reports whether d is a visibility timeout SQS accepts.
func CheckVisibility(d time.Duration) error {
	if d < 0 || d > MaxVisibility {
		return fmt.Errorf("%w: visibility %v (0 to %v)", ErrInvalid, d, MaxVisibility)
	}
	return nil
}

// ValidText reports whether s is valid UTF-8 made only of the characters SQS accepts in a
// message: #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.
func ValidText(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return false
			}
		}
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}
