// Command echo is the bare aws-lambda-go function the cold-start test compares against.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
}
