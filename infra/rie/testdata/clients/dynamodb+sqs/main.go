// Command dynamodb+sqs is the cold-start test's control for a function whose AWS clients are
// DynamoDB and SQS: the bare echo function plus those clients, built as the functions build them.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
)

func main() {
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(logs.Logger(), "aws config", err)
	}
	db, q := lambdaenv.DynamoDB(cfg), sqs.NewFromConfig(cfg)
	lambda.Start(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		_, _ = db, q
		return in, nil
	})
}
