package sqsqueue_test

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsqueue"
)

// In a Lambda function's main: build the client once, from the function's configuration.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return
	}
	q := &sqsqueue.Queue{Client: sqs.NewFromConfig(cfg), URL: "https://sqs.us-east-1.amazonaws.com/123456789012/twice-webhooks"}
	_, _ = q.Send(ctx, []byte(`{"id":"evt_1"}`), queue.SendOptions{Attributes: map[string]string{"provider": "stripe"}})
}
