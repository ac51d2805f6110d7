package recoveryfn_test

import (
	"context"
	"errors"
	"testing"

	"github.com/runtwice/twice/functions/internal/recoveryfn"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/queue"
)

type sent struct {
	body []byte
	opts queue.SendOptions
}

type fakeQueue struct{ got []sent }

func (f *fakeQueue) Send(_ context.Context, body []byte, opts queue.SendOptions) (string, error) {
	f.got = append(f.got, sent{body, opts})
	return "m1", nil
}

func TestRequeuerSendsBackToTheQueueTheMessageDiedOn(t *testing.T) {
	webhooks, resolve := &fakeQueue{}, &fakeQueue{}
	q := deadletter.ByTarget{deadletter.TargetQueue: deadletter.QueueRequeuer{Queues: map[string]deadletter.Sender{
		recoveryfn.QueueName("https://sqs.us-east-1.amazonaws.com/123456789012/twice-prod-webhooks"): webhooks,
		recoveryfn.QueueName("https://sqs.us-east-1.amazonaws.com/123456789012/twice-prod-resolve"):  resolve,
	}}}
	tests := map[string]struct {
		target  deadletter.Target
		want    *fakeQueue
		wantErr error
	}{
		"webhook dead letter": {target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "twice-prod-webhooks-dlq", Body: []byte(`{"a":1}`)}, want: webhooks},
		"resolve dead letter": {target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "twice-prod-resolve-dlq", Body: []byte(`{"b":2}`)}, want: resolve},
		"unknown queue":       {target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "other-dlq"}},
		"not retryable":       {target: deadletter.Target{}, wantErr: deadletter.ErrNotRetryable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			webhooks.got, resolve.got = nil, nil
			err := q.Requeue(context.Background(), tc.target, "retry-1")
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
			case tc.want == nil:
				if err == nil || len(webhooks.got)+len(resolve.got) != 0 {
					t.Fatalf("err %v, sent %d+%d", err, len(webhooks.got), len(resolve.got))
				}
			default:
				if err != nil || len(tc.want.got) != 1 || string(tc.want.got[0].body) != string(tc.target.Body) ||
					tc.want.got[0].opts.Attributes["retry_id"] != "retry-1" || len(webhooks.got)+len(resolve.got) != 1 {
					t.Fatalf("err %v, sent %+v / %+v", err, webhooks.got, resolve.got)
				}
			}
		})
	}
}
