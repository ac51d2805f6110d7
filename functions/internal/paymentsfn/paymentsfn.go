// Package paymentsfn builds the payments.Service that payments-api and payment-resolver share,
// on the AWS adapters: DynamoDB for the store, SSM for the Stripe key. Their follow-on work (the
// resolve queue, recovery starts) is outbox messages the outbox relay delivers, so neither links
// an SQS or Step Functions client.
// It is wiring, as a main is; it lives here so the two mains cannot drift apart.
package paymentsfn

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/retry"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/ssmparam"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// Environment variables (template.yaml sets them).
const (
	EnvStripeKeyParam  = "TWICE_STRIPE_API_KEY_PARAM"
	EnvStripeAPIBase   = "TWICE_STRIPE_API_BASE" // optional: stripe-mock or the simulator in tests
	EnvRetentionDays   = "TWICE_IDEMPOTENCY_RETENTION_DAYS"
	EnvProviderTimeout = "TWICE_PROVIDER_TIMEOUT_MS" // optional, default 3000
)

// Tables are the logical tables the service writes.
var Tables = []string{idempotency.Table, payments.Table, attempts.Table, outbox.Table}

// Build returns the service. It makes no network call: the Stripe key is read from SSM on the
// first provider call and cached (secrets.Cached refreshes it).
func Build(cfg aws.Config, env *lambdaenv.Env, log *slog.Logger) (*payments.Service, error) {
	tables := env.Tables(Tables...)
	keyParam := env.Get(EnvStripeKeyParam)
	days, err := strconv.Atoi(env.Optional(EnvRetentionDays, "7"))
	if err != nil {
		return nil, errors.New("paymentsfn: " + EnvRetentionDays + " is not a number of days")
	}
	timeoutMS, err := strconv.Atoi(env.Optional(EnvProviderTimeout, "3000"))
	if err != nil {
		return nil, errors.New("paymentsfn: " + EnvProviderTimeout + " is not a number of milliseconds")
	}
	if err := env.Err(); err != nil {
		return nil, err
	}

	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		return nil, err
	}
	stripe := Stripe(cfg, keyParam, env.Optional(EnvStripeAPIBase, ""), time.Duration(timeoutMS)*time.Millisecond, attemptLog, log)
	// As locally: an unknown outcome is resolved in the background, not retried while the
	// caller waits.
	policy := retry.NewAPI(retry.Policy{Rand: NewRand(), Log: log})
	keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Retention: time.Duration(days) * 24 * time.Hour,
		Log: log})
	if err != nil {
		return nil, err
	}
	return &payments.Service{
		Store:    st,
		Keeper:   keeper,
		Provider: &retry.Provider{Next: stripe, Policy: policy},
		Classify: declines.ClassOf,
		// Every API request and its answer, under the payment it concerns.
		Exchanges: attempts.API{Record: attempts.BestEffort(attemptLog, log)},
		Log:       log,
	}, nil
}

// Stripe is the Stripe adapter with its key in SSM parameter keyParam (read on the first call,
// then cached and refreshed) and every exchange put into the attempt log.
func Stripe(cfg aws.Config, keyParam, baseURL string, timeout time.Duration, attemptLog *attempts.Log, log *slog.Logger) provider.Provider {
	keys := &secrets.Cached{Getter: ssmparam.New(cfg), Log: log}
	return &stripeprovider.SecretKeyed{Source: keys, Name: keyParam, Client: stripeprovider.Client{
		BaseURL:  baseURL,
		Timeout:  timeout,
		Observer: attempts.StripeObserver{Record: attempts.BestEffort(attemptLog, log)},
	}}
}

// NewRand is a jitter source seeded per container, so two containers do not retry in step.
func NewRand() *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
