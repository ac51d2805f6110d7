// Command payments-api serves POST /payments and GET /payments/{id} behind the HTTP API.
package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/redact"
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	svc, err := paymentsfn.Build(cfg, &lambdaenv.Env{}, log)
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	// Keys are scoped by the authorizer's principal; a request without one is refused. The
	// service records every request and its answer in the attempt log (paymentsfn).
	h := apigw.RequireScope(svc.Handler(apigw.Scope))
	lambda.Start(logs.Handler((&apigw.Adapter{Handler: h}).Invoke))
}
