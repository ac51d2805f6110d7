package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/shared/queue"
)

// Client is the part of *sqs.Client the queue uses.
type Client interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var (
	_ Client             = (*sqs.Client)(nil)
	_ queue.Queue        = (*Queue)(nil)
	_ queue.BatchDeleter = (*Queue)(nil)
)

// Queue is a queue.Queue on one SQS standard queue. Its redrive policy is the queue's
// RedrivePolicy attribute, set by the template.
//
// Build it as a literal: &sqsqueue.Queue{Client: sqs.NewFromConfig(cfg), URL: url}.
type Queue struct {
	Client Client
	// URL is the queue URL.
	URL string
}

// Send implements queue.Queue. SQS counts delays in whole seconds: Delay is rounded up.
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	if err := queue.CheckSend(body, opts); err != nil {
		return "", err
	}
	in := &sqs.SendMessageInput{
		QueueUrl:     &q.URL,
		MessageBody:  aws.String(string(body)),
		DelaySeconds: seconds(opts.Delay),
	}
	if len(opts.Attributes) > 0 {
		in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(opts.Attributes))
		for k, v := range opts.Attributes {
			in.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	out, err := q.Client.SendMessage(ctx, in)
	if err != nil {
		return "", mapError("send", err)
	}
	return aws.ToString(out.MessageId), nil
}

// Receive implements queue.Queue. Visibility and wait are rounded up to whole seconds.
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]queue.Message, error) {
	if err := queue.CheckReceive(max, visibility, wait); err != nil {
		return nil, err
	}
	out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              &q.URL,
		MaxNumberOfMessages:   int32(max),
		VisibilityTimeout:     seconds(visibility),
		WaitTimeSeconds:       seconds(wait),
		MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameSentTimestamp,
		},
	})
	if err != nil {
		return nil, mapError("receive", err)
	}
	msgs := make([]queue.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg, err := decode(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Delete implements queue.Queue.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	if receipt == "" {
		return fmt.Errorf("%w: empty", queue.ErrReceiptInvalid)
	}
	_, err := q.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.URL, ReceiptHandle: &receipt})
	return mapError("delete", err)
}

// DeleteBatch implements queue.BatchDeleter with DeleteMessageBatch.
func (q *Queue) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	if len(receipts) == 0 || len(receipts) > queue.MaxBatch {
		return nil, fmt.Errorf("%w: %d receipts (1 to %d)", queue.ErrInvalid, len(receipts), queue.MaxBatch)
	}
	in := &sqs.DeleteMessageBatchInput{QueueUrl: &q.URL, Entries: make([]types.DeleteMessageBatchRequestEntry, len(receipts))}
	for i, r := range receipts {
		in.Entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
	}
	out, err := q.Client.DeleteMessageBatch(ctx, in)
	if err != nil {
		return nil, mapError("delete batch", err)
	}
	errs := make([]error, len(receipts))
	answered := make([]bool, len(receipts))
	for _, ok := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && i >= 0 && i < len(receipts) {
			answered[i] = true
		}
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(receipts) {
			continue
		}
		answered[i] = true
		errs[i] = mapError("delete batch", &smithy.GenericAPIError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message)})
	}
	for i, ok := range answered {
		if !ok {
			errs[i] = fmt.Errorf("%w: no result for entry %d", ErrBadResponse, i)
		}
	}
	return errs, nil
}

// ChangeVisibility implements queue.Queue. d is rounded up to whole seconds.
func (q *Queue) ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error {
	if err := queue.CheckVisibility(d); err != nil {
		return err
	}
	if receipt == "" {
		return fmt.Errorf("%w: empty", queue.ErrReceiptInvalid)
	}
	_, err := q.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &q.URL, ReceiptHandle: &receipt, VisibilityTimeout: seconds(d),
	})
	return mapError("change visibility", err)
}

func seconds(d time.Duration) int32 {
	return int32(math.Ceil(d.Seconds()))
}

// ErrBadResponse means SQS returned a message the queue cannot read.
var ErrBadResponse = errors.New("sqsqueue: malformed message in response")

// decode turns an SQS message into a queue.Message. Its input comes from the network, so it
// checks what it parses (and has a fuzz target).
func decode(m types.Message) (queue.Message, error) {
	msg := queue.Message{
		ID:            aws.ToString(m.MessageId),
		Body:          []byte(aws.ToString(m.Body)),
		ReceiptHandle: aws.ToString(m.ReceiptHandle),
	}
	if msg.ID == "" || msg.ReceiptHandle == "" {
		return queue.Message{}, fmt.Errorf("%w: no message id or receipt handle", ErrBadResponse)
	}
	count, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || count < 1 {
		return queue.Message{}, fmt.Errorf("%w: ApproximateReceiveCount %q", ErrBadResponse, m.Attributes["ApproximateReceiveCount"])
	}
	msg.ReceiveCount = count
	sent, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil || sent < 0 {
		return queue.Message{}, fmt.Errorf("%w: SentTimestamp %q", ErrBadResponse, m.Attributes["SentTimestamp"])
	}
	msg.SentAt = time.UnixMilli(sent)
	if len(m.MessageAttributes) > 0 {
		msg.Attributes = make(map[string]string, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			// Only String (and Number, which SQS sends as a string) attributes are part of the
			// contract; a Binary one from another sender is dropped rather than failing the batch.
			if v.StringValue != nil {
				msg.Attributes[k] = *v.StringValue
			}
		}
	}
	return msg, nil
}

// mapError wraps SQS errors around the queue sentinels, keeping the original for logs.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ReceiptHandleIsInvalid", "InvalidIdFormat", "MessageNotInflight":
			return fmt.Errorf("sqsqueue: %s: %w: %w", op, queue.ErrReceiptInvalid, err)
		case "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
			return fmt.Errorf("sqsqueue: %s: %w: %w", op, queue.ErrNoQueue, err)
		case "InvalidParameterValue", "InvalidAttributeName", "InvalidAttributeValue", "InvalidMessageContents":
			return fmt.Errorf("sqsqueue: %s: %w: %w", op, queue.ErrInvalid, err)
		}
	}
	return fmt.Errorf("sqsqueue: %s: %w", op, err)
}
