package eventbus

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/payments"
)

func moto(t *testing.T) string {
	t.Helper()
	endpoint := os.Getenv("TWICE_TEST_MOTO_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" || os.Getenv("TWICE_TEST_REQUIRE_SERVERS") == "1" {
			t.Fatal("TWICE_TEST_MOTO_ENDPOINT is not set")
		}
		t.Skip("TWICE_TEST_MOTO_ENDPOINT is not set; start moto_server -H 127.0.0.1 -p PORT and export it")
	}
	return endpoint
}

// TestPublishToEventBridge: changes published through a bus on moto arrive, through a rule on
// the bus, at an SQS queue as EventBridge events: source twice.payments, detail-type the
// change's type, detail the feed event with its sequence; a repeated change is not put again.
func TestPublishToEventBridge(t *testing.T) {
	endpoint := moto(t)
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	eb := eventbridge.New(eventbridge.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, HTTPClient: awshttp.NewBuildableClient()})
	sq := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, HTTPClient: awshttp.NewBuildableClient()})
	name := fmt.Sprintf("twice-test-%d", time.Now().UnixNano())
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventBusName: aws.String(name),
		EventPattern: aws.String(`{"source":["twice.payments"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), EventBusName: aws.String(name),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(qa.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}

	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pub := &feed.Publisher{Store: st, Sink: &Sink{API: eb, Bus: name, Store: st}}
	at := time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC)
	changes := []payments.Change{
		{PaymentID: "pay_1", Version: 10, At: at, Payment: payments.View{ID: "pay_1", Status: "succeeded", Amount: 2500, Currency: "usd"}},
		{PaymentID: "pay_1", Version: 20, At: at.Add(time.Minute), Payment: payments.View{ID: "pay_1", Status: "refunded", Amount: 2500, Currency: "usd", AmountRefunded: 2500}},
	}
	for _, c := range append(changes, changes[1]) { // the last one delivered twice by the relay
		if err := pub.Publish(ctx, fmt.Sprintf("change#%s#%d", c.PaymentID, c.Version), c); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var e struct {
				Source     string     `json:"source"`
				DetailType string     `json:"detail-type"`
				Detail     feed.Event `json:"detail"`
			}
			if err := json.Unmarshal([]byte(*m.Body), &e); err != nil {
				t.Fatalf("%v: %s", err, *m.Body)
			}
			got = append(got, fmt.Sprintf("%s %s %s #%d", e.Source, e.DetailType, e.Detail.PaymentID, e.Detail.Sequence))
		}
	}
	want := "[twice.payments payment.succeeded pay_1 #1 twice.payments payment.refunded pay_1 #2]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if out, _ := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1}); len(out.Messages) != 0 {
		t.Fatalf("a repeated change was put again: %s", *out.Messages[0].Body)
	}
}
