package sqsqueue

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runtwice/twice/shared/queue/queuetest"
)

// motoClient returns an SQS client for the moto server named by TWICE_TEST_MOTO_ENDPOINT, or
// skips the test when there is none (fails instead in CI).
func motoClient(t *testing.T) *sqs.Client {
	t.Helper()
	endpoint := os.Getenv("TWICE_TEST_MOTO_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" || os.Getenv("TWICE_TEST_REQUIRE_SERVERS") == "1" {
			t.Fatal("TWICE_TEST_MOTO_ENDPOINT is not set")
		}
		t.Skip("TWICE_TEST_MOTO_ENDPOINT is not set; start moto_server -H 127.0.0.1 -p PORT and export it")
	}
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   awshttp.NewBuildableClient(),
	})
}

var queueSeq atomic.Int64

// createQueues makes a fresh queue and its dead-letter queue, redriving after maxReceiveCount
// receives, the way the template does.
func createQueues(t *testing.T, c *sqs.Client, maxReceiveCount int) (url, dlqURL string) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("twice-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatalf("create dlq: %v", err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("dlq arn: %v", err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes["QueueArn"], maxReceiveCount)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: map[string]string{"RedrivePolicy": policy},
	})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() {
		c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
		c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl})
	})
	return *q.QueueUrl, *dlq.QueueUrl
}

func TestContractMoto(t *testing.T) {
	c := motoClient(t)
	queuetest.Run(t, queuetest.Suite{
		Tick:                time.Second,
		StaleReceiptDeletes: true, // moto accepts every receipt handle a message ever had
		DuplicatesInFlight:  true,
		Sequential:          true,
		RedriveSlack:        2,
		ExpectWait:          5 * time.Second,
		New: func(t *testing.T) queuetest.Fixture {
			url, dlqURL := createQueues(t, c, queuetest.MaxReceiveCount)
			return queuetest.Fixture{
				Queue: &Queue{Client: c, URL: url}, DLQ: &Queue{Client: c, URL: dlqURL}, Now: time.Now,
				// moto runs on the wall clock; there is nothing to advance, only to wait out.
				Advance: time.Sleep,
			}
		},
	})
}
