// Command webhook-worker applies verified webhook deliveries from the webhook queue exactly once.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

func main() {
	log := logs.Logger()
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	// payment_intent.payment_failed starts recovery through the outbox (functions/outbox-relay).
	// A delivery an operator retried closes its dead-letter record (deadletter.Retries, beside
	// the worker in the batch).
	tables := env.Tables(payments.EventsTable, payments.Table, outbox.Table, deadletter.Table)
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	w := &worker.Worker{Applier: &payments.Applier{Store: st, Classify: declines.ClassOf,
		Steer: recovery.SteerMessages, Replan: recovery.ReplanMessages, Log: log}}
	retries := &deadletter.Retries{Loop: &deadletter.Records{Store: st, Log: log}, Log: log,
		Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
	lambda.Start(logs.Handler((&sqsbatch.Batch{Each: w.Handle, Report: retries, Log: log}).Handle)) // ReportBatchItemFailures
}
