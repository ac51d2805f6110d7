// Command stack is a deployment of template.yaml's HTTP API in the emulator form, for following
// docs/deploy.md without AWS: payments-api, webhook-ingest and operator-api built as the
// template builds them, under aws-lambda-rie, behind one HTTP API stand-in with the template's
// routes (after the SAM transform), JWT authorizer and scopes, on DynamoDB Local and moto (started by
// scripts/with-servers.sh, which exports their addresses), and the Stripe simulator in place of
// Stripe, sending its signed webhooks to the API's /webhooks/stripe.
//
// The secrets are the SSM parameters docs/deploy.md creates, here in moto:
// /twice/STAGE/stripe-api-key (the simulator accepts that key), /twice/STAGE/stripe-webhook-secret
// (the simulator signs with its first value, as a Stripe endpoint signs with its secret) and
// /twice/STAGE/standard-webhook-secret. The authorizer stands in for the issuer: it admits two
// bearer tokens, a payments caller's (scope twice/payments) and an operator's (twice/ops).
//
//	bash scripts/with-servers.sh bash -c 'aws --endpoint-url "$TWICE_TEST_MOTO_ENDPOINT" ssm put-parameter ...;
//	  go run ./infra/rie/cmd/stack -stage dev -addr 127.0.0.1:3300 -sim-addr 127.0.0.1:12300'
//
// It serves until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

func main() {
	stage := flag.String("stage", "dev", "the stage: resources are twice-STAGE-*, parameters /twice/STAGE/*")
	addr := flag.String("addr", "127.0.0.1:3300", "the HTTP API's address (loopback)")
	simAddr := flag.String("sim-addr", "127.0.0.1:12300", "the Stripe simulator's address (loopback)")
	payments := flag.String("payments-token", "emulator-payments-token", "the bearer token the authorizer admits for a payments caller")
	operator := flag.String("operator-token", "emulator-operator-token", "the bearer token the authorizer admits for an operator")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *stage, *addr, *simAddr, *payments, *operator); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stage, addr, simAddr, paymentsToken, operatorToken string) error {
	ddb, moto, rieBin := os.Getenv(testenv.EnvDynamoDB), os.Getenv(testenv.EnvMoto), os.Getenv(testenv.EnvRIE)
	if ddb == "" || moto == "" || rieBin == "" {
		return fmt.Errorf("%s, %s and %s must be set: run through scripts/with-servers.sh",
			testenv.EnvDynamoDB, testenv.EnvMoto, testenv.EnvRIE)
	}
	root, err := rie.ModuleRoot(".")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "twice-stack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	apiLn, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	simLn, err := net.Listen("tcp", simAddr)
	if err != nil {
		return err
	}
	tokens := map[string]map[string]any{
		paymentsToken: {"sub": "emulator-payments-client", "scope": "twice/payments"},
		operatorToken: {"sub": "emulator-operator", "scope": "twice/ops"},
	}
	fmt.Fprintf(os.Stderr, "stack: building %v for linux/%s\n", rie.StackFunctions, runtime.GOARCH)
	s, err := rie.StartStack(ctx, rie.StackConfig{Root: root, RIE: rieBin, APIListener: apiLn, SimListener: simLn, DataDir: dir,
		// The parameters the guide creates, read by the functions and the simulator.
		Fixture: func(ctx context.Context, simURL string) (*rie.Fixture, error) {
			fx, err := rie.NewResources(ctx, root, "twice-"+stage, ddb, moto, simURL)
			if err != nil {
				return nil, err
			}
			for _, key := range []string{"stripe-api-key", "stripe-webhook-secret", "standard-webhook-secret"} {
				fx.Params[key] = "/twice/" + stage + "/" + key
			}
			return fx, nil
		},
		Params: []string{"JwtIssuer=https://issuer.emulator.invalid/", "JwtAudience=twice-emulator"},
		Verify: func(_ context.Context, _ rie.Route, tok string) (map[string]any, error) {
			if c, ok := tokens[tok]; ok {
				return c, nil
			}
			return nil, errors.New("not a token the issuer signed")
		},
	})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf(`twice-%s in the emulator form
  ApiUrl          %s
  Stripe (sim)    %s, webhooks to %s/webhooks/stripe
  payments token  %s (scope twice/payments)
  operator token  %s (scope twice/ops)

  go run ./infra/twicectl --url %s --token %s smoke --payments-token %s
`, stage, s.URL, s.SimURL, s.URL, paymentsToken, operatorToken, s.URL, operatorToken, paymentsToken)
	<-ctx.Done()
	return nil
}
