// Command recovery-steps runs the payment-recovery state machine's Task states (plan, charge,
// dead_letter).
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/retry"
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	// A charge's outcome commits with its change on the outbound event feed (outbox).
	tables := env.Tables(payments.Table, deadletter.Table, attempts.Table, outbox.Table)
	keyParam := env.Get(paymentsfn.EnvStripeKeyParam)
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	stripe := paymentsfn.Stripe(cfg, keyParam, env.Optional(paymentsfn.EnvStripeAPIBase, ""), 10*time.Second, attemptLog, log)
	// A recovery charge carries its attempt key, so an unknown outcome may be repeated inline.
	policy := retry.New(retry.Policy{Rand: paymentsfn.NewRand(), Log: log})
	steps, err := recovery.NewSteps(recovery.Steps{
		Provider: &retry.Provider{Next: stripe, Policy: policy},
		Store:    st,
		// An exhausted or hard-declined recovery opens a record: DeadLetterOpen moves with it.
		DeadLetters: recovery.DeadLetterRecords{Records: &deadletter.Records{Store: st, Log: log,
			Metrics: &deadletter.EMF{Out: env.Metrics()}}},
		Policy: recovery.DefaultPolicy(),
		Now:    time.Now,
		Rand:   paymentsfn.NewRand(),
		Log:    log,
	})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	// Errors reach Step Functions under their names (Recovery.Transient, ...) for Retry/Catch.
	lambda.Start(logs.Handler(recovery.LambdaHandler(steps.Handle)))
}
