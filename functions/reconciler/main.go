// Command reconciler compares a recent window of payments against the provider on the
// EventBridge Scheduler's schedule, and opens a dead-letter record per difference.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runtwice/twice/functions/internal/paymentsfn"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/retry"
)

// envCustomerWindow is how long a payment may wait for its customer (default
// payments.DefaultCustomerWindow).
const envCustomerWindow = "TWICE_CUSTOMER_WINDOW"

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	// The backfill pass applies the provider's events as the webhook worker does: its tables too.
	tables := env.Tables(payments.Table, recon.RunsTable, recon.DifferencesTable, deadletter.Table, attempts.Table,
		payments.EventsTable, outbox.Table)
	keyParam := env.Get(paymentsfn.EnvStripeKeyParam)
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	window, err := time.ParseDuration(env.Optional(envCustomerWindow, payments.DefaultCustomerWindow.String()))
	if err != nil || window <= 0 {
		logs.Fatal(log, "config", errors.New(envCustomerWindow+" is not a positive duration"))
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	stripe := paymentsfn.Stripe(cfg, keyParam, env.Optional(paymentsfn.EnvStripeAPIBase, ""), 10*time.Second, attemptLog, log)
	// Listing is a read: every failure may be retried, with the policy's budget.
	policy := retry.New(retry.Policy{Rand: paymentsfn.NewRand(), Log: log})
	emf := env.Metrics()
	deadletters := &deadletter.Records{Store: st, Log: log, Metrics: &deadletter.EMF{Out: emf}}
	if _, ok := stripe.(provider.EventLister); !ok {
		logs.Fatal(log, "config", errors.New("the Stripe adapter lists no events"))
	}
	// The event log is read under the same policy: a throttled page is retried, not the run.
	reads := &retry.Provider{Next: stripe, Policy: policy}
	// The one path of the provider's observations: the backfill applies the provider's events
	// through it, reconciliation heals through it.
	applier := &payments.Applier{Store: st, Classify: declines.ClassOf, Steer: recovery.SteerMessages,
		Replan: recovery.ReplanMessages, Log: log}
	r := &recon.Reconciler{
		Store:    st,
		Provider: reads,
		// Each difference opens a dead-letter record: DeadLetterOpen moves with it.
		Sink:    recon.DeadLetterRecords{Records: deadletters},
		Metrics: &recon.Metrics{Out: emf}, // EMF: the run's counts become CloudWatch metrics
		Log:     log,
		Events:  reads, // a change in the window (a refund of an older payment) is compared too
		Healer:  applier,
		// A payment waiting for its customer past the window is canceled at the provider.
		Bounds: payments.Bounds{CustomerWindow: window},
	}
	// Each invocation also carries out the operators' retries of failed runs (recon.PendingRetries).
	run := recon.PendingRetries{Records: deadletters, Run: r.Handle, Log: log}
	// An event the backfill cannot apply now goes to the webhook queue through the outbox (the
	// relay sends it): this function links no queue client.
	bf := &backfill.Backfill{Store: st, Events: reads, Applier: applier, Log: log, Metrics: emf}
	reconcile := func(ctx context.Context, raw json.RawMessage) (any, error) { return r.Handle(ctx, raw) }
	// input: the Scheduler's {"scheduled_time": ...} or {"from","to"}; {"backfill":{...}} for a
	// backfill pass. Either is followed by the retried failed runs (run.After), so an operator's
	// retry waits at most the backfill's period.
	lambda.Start(logs.Handler(run.After(bf.Handler(reconcile))))
}
