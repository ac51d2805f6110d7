// Command payments-api serves POST /payments and GET /payments/{id} behind the HTTP API.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/lambdaenv"
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
	// Keys are scoped by the authorizer's principal; a request without one is refused.
	lambda.Start(lambdaenv.Handler(apigw.New(apigw.RequireScope(svc.Handler(apigw.Scope))).Invoke))
}
