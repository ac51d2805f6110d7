// Command operator-api serves /ops: the dead-letter JSON API behind the HTTP API's JWT
// authorizer, and the console, whose routes have no authorizer: the function signs operators
// in through the OIDC issuer (authorization code + PKCE) and enforces its own session.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/logs"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/ssmparam"
)

func main() {
	// Every string in every log line is redacted and capped: outside input reaches the logs.
	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
	cfg, err := lambdaenv.AWS(context.Background())
	if err != nil {
		logs.Fatal(log, "aws config", err)
	}
	env := &lambdaenv.Env{}
	tables := env.Tables(deadletter.Table, attempts.Table, payments.Table, outbox.Table)
	login, sessionKey := consoleLogin(cfg, env, log)
	if err := env.Err(); err != nil {
		logs.Fatal(log, "config", err)
	}
	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
	emf := &deadletter.EMF{Out: env.Metrics()}
	// A retry and a steering signal are committed with an outbox message that outbox-relay
	// delivers (re-enqueue, restart the recovery, bring a parked recovery's timer forward):
	// this function calls DynamoDB only, so it links no SQS or Step Functions client.
	table := &deadletter.Records{Store: st, Log: log, Metrics: emf}
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	ops, err := opsapi.New(opsapi.Handler{
		Records:  table,
		Attempts: attemptLog,
		// A lookup by a caller's own Idempotency-Key names its scope (&scope=jwt:...): in AWS
		// every caller has its own.
		PaymentIDFor: payments.PaymentID,
		Payments:     opsapi.StorePayments{Store: st},
		Recoveries:   opsapi.StorePayments{Store: st},
		Steer:        &recovery.Steerer{Store: st, Now: time.Now},
		// JSON API routes: the JWT authorizer's subject. Console routes carry none.
		Principal:        func(r *http.Request) (string, bool) { p := apigw.Scope(r); return p, p != "" },
		SessionKeySource: sessionKey,
		OIDC:             login,
		Secure:           true,
		Log:              log,
	})
	if err != nil {
		logs.Fatal(log, "config", err)
	}
	lambda.Start(logs.Handler((&apigw.Adapter{Handler: ops}).Invoke))
}

// consoleLogin is the console's OIDC sign-in from the environment (TWICE_OIDC_*), and the
// session key: an SSM SecureString read on first use, because a console session cookie is a
// credential. Without TWICE_OIDC_ISSUER the console has no sign-in in AWS.
func consoleLogin(cfg aws.Config, env *lambdaenv.Env, log *slog.Logger) (*opsapi.OIDCLogin, func(context.Context) ([]byte, error)) {
	issuer := env.Optional("TWICE_OIDC_ISSUER", "")
	if issuer == "" {
		return nil, nil
	}
	params := &secrets.Cached{Getter: ssmparam.New(cfg), Log: log}
	first := func(name string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			v, err := params.Secrets(ctx, name)
			if err != nil || len(v) == 0 {
				return "", errors.Join(errors.New("operator-api: parameter "+name), err)
			}
			return v[0], nil
		}
	}
	keyParam := env.Get("TWICE_OPS_SESSION_KEY_PARAM")
	login := &opsapi.OIDCLogin{
		Issuer:      issuer,
		ClientID:    env.Get("TWICE_OIDC_CLIENT_ID"),
		RedirectURL: env.Optional("TWICE_OIDC_REDIRECT_URL", ""),
		Scopes:      strings.Fields(env.Optional("TWICE_OIDC_SCOPES", "openid email")),
		GroupClaim:  env.Optional("TWICE_OPS_GROUP_CLAIM", "groups"),
		Group:       env.Optional("TWICE_OPS_GROUP", ""),
	}
	if p := env.Optional("TWICE_OIDC_CLIENT_SECRET_PARAM", ""); p != "" {
		login.ClientSecret = first(p)
	}
	key := first(keyParam)
	return login, func(ctx context.Context) ([]byte, error) {
		k, err := key(ctx)
		return []byte(k), err
	}
}
