package testenv_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/infra/testenv"
)

// A store test against DynamoDB Local: a fresh table per test, deleted when it ends. Run
// through `make test`, or it is skipped (and fails under CI=true).
func ExampleCreateTable() {
	var t *testing.T // the test's own t
	db := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, db, testenv.Schema{SortKey: true, GSI1: true})
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "payment#1"},
			"sk": &ddbtypes.AttributeValueMemberS{Value: "v1"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Clients of the services moto stands in for take the same config.
func ExampleMotoConfig() {
	var t *testing.T // the test's own t
	queues := sqs.NewFromConfig(testenv.MotoConfig(t))
	_, err := queues.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("webhooks")})
	if err != nil {
		t.Fatal(err)
	}
}
