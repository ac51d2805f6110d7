// Command dynamodb+eventbridge+sfn+sqs is the cold-start test's control for the outbox relay's
// clients: the bare echo function plus DynamoDB, EventBridge, Step Functions and SQS clients,
// built as the functions build them.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
)

func main() {
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(logs.Logger(), "aws config", err)
	}
	db, bus, sf, q := lambdaenv.DynamoDB(cfg), eventbridge.NewFromConfig(cfg), sfn.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	lambda.Start(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		_, _, _, _ = db, bus, sf, q
		return in, nil
	})
}
