// Command reconciler compares a recent window of payments against the provider on the
// EventBridge Scheduler's schedule, and opens a dead-letter record per difference.
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/deadletter/adapt"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/retry"
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(attempts.RedactingHandler(lambdaenv.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		lambdaenv.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	tables := env.Tables(payments.Table, recon.RunsTable, recon.DifferencesTable, deadletter.TableName, attempts.Table)
	keyParam := env.Get(paymentsfn.EnvStripeKeyParam)
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	attemptLog, err := attempts.NewLog(st, attempts.Config{})
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	stripe := paymentsfn.Stripe(cfg, keyParam, env.Optional(paymentsfn.EnvStripeAPIBase, ""), 10*time.Second, attemptLog, log)
	// Listing is a read: every failure may be retried, with the policy's budget.
	policy := retry.New(paymentsfn.NewRand())
	policy.Logger = log
	emf := env.Metrics()
	deadletters := deadletter.NewTable(st, nil, deadletter.WithLogger(log), deadletter.WithMetrics(&deadletter.EMF{Out: emf}))
	r, err := recon.New(recon.Config{
		Store:    st,
		Provider: &retry.Provider{Next: stripe, Policy: policy},
		// Each difference opens a dead-letter record: DeadLetterOpen moves with it.
		Sink:    adapt.ReconSink{Table: deadletters},
		Metrics: &recon.Metrics{Out: emf}, // EMF: the run's counts become CloudWatch metrics
		Log:     log,
	})
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	// Each run also carries out the operators' retries of failed runs (adapt.PendingReconciles).
	run := adapt.PendingReconciles{Table: deadletters, Run: r.Handle, Log: log}
	lambda.Start(lambdaenv.Handler(run.Handle)) // input: the Scheduler's {"scheduled_time": ...} or {"from","to"}
}
