// Command webhook-ingest serves POST /webhooks/{provider}: verify the signature, enqueue, 200.
package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/sqsqueue"
	"github.com/runtwice/twice/shared/ssmparam"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
	"github.com/runtwice/twice/shared/webhooks/signature"
)

// maxBody keeps a delivery, base64 inside its JSON message, under SQS's 256 KiB default limit.
const maxBody = 180 << 10

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	queueURL := env.Get("TWICE_WEBHOOK_QUEUE_URL")
	tables := env.Tables(attempts.Table)
	names := map[string]string{
		webhooks.ProviderStripe:   env.Get("TWICE_STRIPE_WEBHOOK_SECRET_PARAM"),
		webhooks.ProviderStandard: env.Get("TWICE_STANDARD_WEBHOOK_SECRET_PARAM"),
	}
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	// Secrets are read from SSM on the first delivery and cached; INIT makes no call. ssmparam,
	// not the SDK's ssm client, whose package init alone cost ~8 ms of every cold start.
	src := &secrets.Cached{Getter: ssmparam.New(cfg), Log: log}
	verifiers, err := signature.NewRotating(signature.Rotating{Source: src, Names: names})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	attemptLog, err := attempts.NewLog(attempts.Log{Store: dynamo.New(lambdaenv.DynamoDB(cfg), tables)})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	in := &ingest.Handler{Verifiers: verifiers, Queue: ingest.QueueSink{Queue: &sqsqueue.Queue{Client: sqs.NewFromConfig(cfg), URL: queueURL}},
		MaxBody: maxBody, Log: log, Observer: attempts.IngestObserver{Record: attempts.BestEffort(attemptLog, log)}}
	mux := http.NewServeMux()
	mux.Handle(ingest.Pattern, in) // it reads the {provider} wildcard
	// No authorizer: a webhook proves itself by its signature.
	lambda.Start(logs.Handler((&apigw.Adapter{Handler: mux}).Invoke))
}
