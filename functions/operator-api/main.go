// Command operator-api serves /ops: the dead-letter actions, attempt lookup and the console,
// behind the HTTP API's JWT authorizer.
package main

import (
	"context"
	"crypto/sha256"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/functions/internal/recoveryfn"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/deadletter/adapt"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/sqsqueue"
)

func main() {
	log := lambdaenv.Logger()
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		lambdaenv.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	tables := env.Tables(deadletter.TableName, attempts.Table, payments.Table)
	webhookURL, resolveURL := env.Get("TWICE_WEBHOOK_QUEUE_URL"), env.Get("TWICE_RESOLVE_QUEUE_URL")
	recoverer := recoveryfn.Recoverer(cfg, env, log)
	seed := env.Get("TWICE_OPS_SESSION_SEED")
	if err := env.Err(); err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	sq := sqs.NewFromConfig(cfg)
	requeue := adapt.Requeuer{Store: st, Recoverer: recoverer, Queues: map[string]adapt.Sender{
		recoveryfn.QueueName(webhookURL): sqsqueue.New(sq, webhookURL),
		recoveryfn.QueueName(resolveURL): sqsqueue.New(sq, resolveURL),
	}}
	emf := &deadletter.EMF{Out: env.Metrics()}
	table := deadletter.NewTable(st, requeue, deadletter.WithLogger(log), deadletter.WithMetrics(emf))
	attemptLog, err := attempts.NewLog(st, attempts.Config{})
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	// Every request carries its own bearer JWT, checked by API Gateway, which a cross-site form
	// cannot attach; the console's CSRF tokens are defence in depth and only need a key that
	// every container shares, not a secret: the stack id the template passes in.
	key := sha256.Sum256([]byte("twice-ops-session:" + seed))
	ops, err := opsapi.New(opsapi.Config{
		Records:    table,
		Attempts:   attemptLog,
		Principal:  func(r *http.Request) (string, bool) { p := apigw.Scope(r); return p, p != "" },
		SessionKey: key[:],
		Secure:     true,
		Logger:     log,
	})
	if err != nil {
		lambdaenv.Fatal(log, "config", err)
	}
	lambda.Start(lambdaenv.Handler(apigw.New(apigw.RequireScope(ops)).Invoke))
}
