// Command payment-resolver resolves payments whose provider outcome was unknown: it consumes the
// resolve queue and repeats each call with the same provider idempotency key.
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/payments/resolvequeue"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/sqsqueue"
)

const (
	envResolveQueueURL = "TWICE_RESOLVE_QUEUE_URL"
	// resolveVisibility is template.yaml's ResolveQueue VisibilityTimeout: a busy job never
	// waits longer than it.
	resolveVisibility = 180 * time.Second
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	// A job an operator retried closes its dead-letter record (deadletter.Retries, beside the
	// resolver in the batch).
	dl := env.Tables(deadletter.Table)
	// A busy job comes back when its key can next be taken: the batch changes its message's
	// visibility (sqsbatch.RetryAfter).
	resolveQueue := &sqsqueue.Queue{Client: sqs.NewFromConfig(cfg), URL: env.Get(envResolveQueueURL)}
	svc, err := paymentsfn.Build(cfg, env, log)
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	retries := &deadletter.Retries{Loop: &deadletter.Records{Store: dynamo.New(lambdaenv.DynamoDB(cfg), dl), Log: log},
		Log: log, Done: deadletter.ResolverDone, Failed: deadletter.ResolverFailed}
	b := &sqsbatch.Batch{Each: resolvequeue.Consumer{Service: svc}.Handle, Report: retries, Log: log,
		Visibility: resolveQueue, VisibilityTimeout: resolveVisibility}
	lambda.Start(logs.Handler(b.Handle)) // ReportBatchItemFailures
}
