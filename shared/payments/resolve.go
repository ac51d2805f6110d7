package payments

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/queue"
)

// HandleResolve is the resolve queue's SQS handler: each record's body is a JSON ResolveJob.
// A job that fails (or does not decode) is reported alone as a batch item failure, so SQS
// retries it and, after the queue's maxReceiveCount, moves it to the dead-letter queue.
func (s *Service) HandleResolve(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		var job ResolveJob
		err := json.Unmarshal([]byte(m.Body), &job)
		if err == nil && (job.Scope == "" || job.Key == "" || job.PaymentID == "") {
			err = errors.New("payments: resolve job without scope, key or payment id")
		}
		if err == nil {
			err = s.Resolve(ctx, job)
		}
		if err != nil {
			s.log().InfoContext(ctx, "resolve job will run again", "message_id", m.MessageId, "error", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

// Sender is the one queue call QueueResolver makes; queue.Queue (SQS, the local queue)
// satisfies it.
type Sender interface {
	Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error)
}

// QueueResolver queues resolve jobs as JSON on a queue, each delayed by Delay so the provider
// has time to settle before the repeat.
type QueueResolver struct {
	Queue Sender
	Delay time.Duration
}

var _ Resolver = QueueResolver{}

// EnqueueResolve implements Resolver.
func (r QueueResolver) EnqueueResolve(ctx context.Context, job ResolveJob) error {
	b, err := json.Marshal(job)
	if err != nil {
		return err
	}
	_, err = r.Queue.Send(ctx, b, queue.SendOptions{Delay: r.Delay})
	return err
}
