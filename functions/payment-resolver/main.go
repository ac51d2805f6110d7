// Command payment-resolver resolves payments whose provider outcome was unknown: it consumes the
// resolve queue and repeats each call with the same provider idempotency key.
package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/lambdaenv"
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(attempts.RedactingHandler(lambdaenv.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		lambdaenv.Fatal(log, "aws config", err)
	}
	svc, err := paymentsfn.Build(cfg, &lambdaenv.Env{}, log)
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	lambda.Start(lambdaenv.Handler(svc.HandleResolve)) // per-message failures: ReportBatchItemFailures
}
