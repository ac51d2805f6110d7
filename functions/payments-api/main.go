// Command payments-api serves POST /payments and GET /payments/{id} behind the HTTP API.
package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/payments"
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
	attemptLog, err := attempts.NewLog(attempts.Log{Store: svc.Store})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	// Keys are scoped by the authorizer's principal; a request without one is refused.
	served := apigw.RequireScope(svc.Handler(apigw.Scope))
	// Every request and answer goes to the attempt log, under the payment it concerns: named
	// here, before the handler runs, so the log calls nothing back once it has answered.
	api := attempts.API{Record: attempts.BestEffort(attemptLog, log)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope := apigw.Scope(r)
		api.Serve(w, r, attempts.Filing{Operation: payments.APIOperation(r), Scope: scope,
			PaymentID: payments.PaymentOfRequest(r, scope, r.Header.Get("Idempotency-Key"))}, served)
	})
	lambda.Start(logs.Handler((&apigw.Adapter{Handler: h}).Invoke))
}
