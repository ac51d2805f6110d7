// Command outbox-relay delivers the follow-on work committed in the outbox table, every kind
// followon.Handlers registers (queue a resolve job, start a recovery, send an operator's
// dead-letter retry, resume a parked recovery, requeue an event the backfill could not
// apply, publish a payment change, ...): the table's DynamoDB stream invokes it with the new
// messages, and a schedule sweeps up what the stream could not deliver.
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/functions/internal/recoveryfn"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/eventbus"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/outbox/followon"
	"github.com/runtwice/twice/shared/outbox/outboxlambda"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/sqsqueue"
)

const (
	envResolveQueueURL = "TWICE_RESOLVE_QUEUE_URL"
	envWebhookQueueURL = "TWICE_WEBHOOK_QUEUE_URL" // an operator's retry of a dead delivery; events a backfill pass could not apply
	envEventBusName    = "TWICE_EVENT_BUS_NAME"    // the outbound payment events
	// resolveDelay is how long a resolve job waits before it repeats the provider call.
	resolveDelay = 5 * time.Second
)

func main() {
	log := logs.Logger()
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	st, handlers, err := followOns(cfg, &lambdaenv.Env{}, log)
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	// The schedule's sweep (every minute) leaves what the stream delivers within minutes to the
	// stream, and fires the timers the stream leaves as soon as they are due.
	relay := &outbox.Relay{Store: st, Handlers: handlers, Log: log, MinAge: 10 * time.Minute}
	h := &outboxlambda.Handler{Relay: relay}
	lambda.Start(h.Handle) // stream batches (per-record failures) and the scheduled sweep
}

// followOns returns the outbox relay's handlers (followon.Handlers) and the store they read
// and mark done: the part of the payments service that delivers follow-on work, without the
// provider, so the relay holds no Stripe key and calls no provider.
func followOns(cfg aws.Config, env *lambdaenv.Env, log *slog.Logger) (*dynamo.Store, map[string]outbox.Handler, error) {
	tables := env.Tables(payments.Table, outbox.Table, deadletter.Table)
	queueURL := env.Get(envResolveQueueURL)
	webhookURL := env.Get(envWebhookQueueURL)
	bus := env.Get(envEventBusName)
	recoverer := recoveryfn.Recoverer(cfg, env, log)
	if err := env.Err(); err != nil {
		return nil, nil, err
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	sq := sqs.NewFromConfig(cfg)
	resolveQueue := &sqsqueue.Queue{Client: sq, URL: queueURL}
	webhookQueue := &sqsqueue.Queue{Client: sq, URL: webhookURL}
	handlers, err := followon.Handlers(followon.Targets{
		Payments: &payments.Service{Store: st, Log: log, OnDecline: recoverer,
			Resolver: &payments.QueueResolver{Queue: resolveQueue, Delay: resolveDelay}},
		// A parked recovery's timer, and the wake of a steering signal (operator-api's or
		// webhook-worker's) that brings it forward, on Step Functions.
		Steerer: recoveryfn.Steerer(cfg, env, st),
		// An operator's retry of a dead letter, committed by operator-api: back to the queue the
		// message died on, a new recovery round, or the reconciler's next run.
		DeadLetters: &deadletter.Records{Store: st, Log: log, Requeuer: deadletter.ByTarget{
			deadletter.TargetQueue: deadletter.QueueRequeuer{Queues: map[string]deadletter.Sender{
				recoveryfn.QueueName(webhookURL): webhookQueue,
				recoveryfn.QueueName(queueURL):   resolveQueue,
			}},
			deadletter.TargetRecovery:  recovery.Requeuer{Store: st, Recoverer: recoverer},
			deadletter.TargetReconcile: recon.RequeueAtNextRun{},
		}},
		// An event the reconciler's backfill pass could not apply.
		WebhookQueue: webhookQueue,
		// Every applied payment change goes out on the EventBridge bus, numbered per payment.
		Publisher: &feed.Publisher{Store: st, Sink: &eventbus.Sink{API: eventbridge.NewFromConfig(cfg), Bus: bus, Store: st}, Log: log},
	})
	if err != nil {
		return nil, nil, err
	}
	return st, handlers, nil
}
