// Command outbox-relay delivers the follow-on work committed in the outbox table (queue a resolve
// job, start a recovery): the table's DynamoDB stream invokes it with the new messages, and a
// schedule sweeps up what the stream could not deliver.
package main

import (
	"context"
	"time"

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
	st, handlers, err := paymentsfn.FollowOns(cfg, &lambdaenv.Env{}, log)
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	// The schedule's sweep leaves what the stream delivers within minutes to the stream.
	relay := &outbox.Relay{Store: st, Handlers: handlers, Log: log, MinAge: 10 * time.Minute}
	lambda.Start(relay.Handle) // stream batches (per-record failures) and the scheduled sweep
}
