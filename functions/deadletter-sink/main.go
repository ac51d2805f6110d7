// Command deadletter-sink turns every message that dies in a dead-letter queue into a
// reviewable dead-letter record.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/sqsbatch"
)

func main() {
	log := logs.Logger()
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	tables := env.Tables(deadletter.Table)
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	// The open count goes to stdout as EMF; the dead-letter growth alarm watches it.
	emf := &deadletter.EMF{Out: env.Metrics()}
	// No Requeuer: the sink only opens records; retries are the operator API's.
	table := &deadletter.Records{Store: dynamo.New(lambdaenv.DynamoDB(cfg), tables),
		Log: log, Metrics: emf}
	sink := &deadletter.Sink{Records: table, Metrics: emf, Count: table.OpenCount}
	// One record per message (ReportBatchItemFailures), then the open count for the batch.
	lambda.Start(logs.Handler((&sqsbatch.Batch{Each: sink.Handle, Log: log, AfterBatch: sink.ReportOpen}).Handle))
}
