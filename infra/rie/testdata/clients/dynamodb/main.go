// Command dynamodb is the cold-start test's control for a function whose one AWS client is
// DynamoDB: the bare echo function plus that client, built as the functions build it.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
)

func main() {
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(logs.Logger(), "aws config", err)
	}
	db := lambdaenv.DynamoDB(cfg)
	lambda.Start(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		_ = db
		return in, nil
	})
}
