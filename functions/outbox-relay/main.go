// Command outbox-relay delivers the follow-on work committed in the outbox table (queue a resolve
// job, start a recovery): the table's DynamoDB stream invokes it with the new messages.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/outbox"
)

func main() {
	log := lambdaenv.Logger()
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		lambdaenv.Fatal(log, "aws config", err)
	}
	svc, err := paymentsfn.Build(cfg, &lambdaenv.Env{}, log)
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	relay := &outbox.Relay{Store: svc.Store, Handlers: svc.FollowOns(), Log: log}
	lambda.Start(relay.HandleStream) // per-record failures: ReportBatchItemFailures
}
