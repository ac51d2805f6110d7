package rie

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runtwice/twice/infra/providersim/stripesim"
)

// StackFunctions are the functions behind the HTTP API: what a caller, Stripe and an operator
// reach.
var StackFunctions = []string{"payments-api", "webhook-ingest", "operator-api"}

// StackConfig says how to start a Stack.
type StackConfig struct {
	Root string // the module root
	RIE  string // the aws-lambda-rie binary
	// APIListener and SimListener are the loopback addresses of the API and the simulator.
	APIListener, SimListener net.Listener
	// Fixture creates the tables, queues, state machine and names the SSM parameters, given
	// the simulator's URL (the functions' Stripe API base).
	Fixture func(ctx context.Context, simURL string) (*Fixture, error)
	// Params set template parameters for the routes' authorizer ("JwtIssuer=...",
	// "JwtAudience=..."; HTTPAPIRoutes).
	Params []string
	// Verify is the JWT authorizer's stand-in (Gateway.Verify).
	Verify func(ctx context.Context, route Route, token string) (map[string]any, error)
	// DataDir holds the simulator's state and the built functions.
	DataDir string
	// Start starts one built function; the default runs it under RIE with the fixture's
	// environment.
	Start func(ctx context.Context, fn, bootstrap string, fx *Fixture) (*Emulator, error)
}

// Stack is template.yaml's HTTP API in the emulator form: StackFunctions built as the template
// builds them, under aws-lambda-rie, behind the HTTP API stand-in (Gateway) with the template's
// routes after the SAM transform, their authorizer and scopes, on DynamoDB Local and moto; and the Stripe simulator in Stripe's
// place, accepting the key in the stripe-api-key SSM parameter and sending webhooks signed with
// the first secret in the stripe-webhook-secret one to the API's /webhooks/stripe. cmd/stack
// serves one for a person following docs/deploy.md; TestSmokeUnderEmulator runs twicectl smoke
// against one.
type Stack struct {
	URL, SimURL string
	Fixture     *Fixture
	Sim         *stripesim.Simulator
	close       []func()
}

// StartStack starts a Stack; Close stops it.
func StartStack(ctx context.Context, cfg StackConfig) (_ *Stack, err error) {
	s := &Stack{URL: "http://" + cfg.APIListener.Addr().String(), SimURL: "http://" + cfg.SimListener.Addr().String()}
	s.close = append(s.close, func() { cfg.APIListener.Close(); cfg.SimListener.Close() })
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Fixture, err = cfg.Fixture(ctx, s.SimURL); err != nil {
		return nil, err
	}
	// The secrets the functions read, as the operator stored them.
	params := ssm.NewFromConfig(s.Fixture.MotoConfig)
	value := func(key string) (string, error) {
		out, err := params.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(s.Fixture.Params[key]), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", errors.Join(errors.New("rie: SSM parameter "+s.Fixture.Params[key]), err)
		}
		v, _, _ := strings.Cut(aws.ToString(out.Parameter.Value), ",")
		return v, nil
	}
	key, err := value("stripe-api-key")
	if err != nil {
		return nil, err
	}
	secret, err := value("stripe-webhook-secret")
	if err != nil {
		return nil, err
	}
	if s.Sim, err = stripesim.New(stripesim.Config{DataDir: filepath.Join(cfg.DataDir, "sim"), APIKeys: []string{key},
		WebhookURL: s.URL + "/webhooks/stripe", WebhookSecret: secret}); err != nil {
		return nil, err
	}
	s.close = append(s.close, func() { s.Sim.Close() })
	simSrv := &http.Server{Handler: s.Sim, ReadHeaderTimeout: 10 * time.Second}
	go simSrv.Serve(cfg.SimListener)
	s.close = append(s.close, func() { simSrv.Close() })

	start := cfg.Start
	if start == nil {
		start = func(ctx context.Context, _, bootstrap string, fx *Fixture) (*Emulator, error) {
			return Start(ctx, cfg.RIE, bootstrap, fx.Env())
		}
	}
	routes, err := HTTPAPIRoutes(ctx, cfg.Root, cfg.Params...)
	if err != nil {
		return nil, err
	}
	api := &Gateway{Routes: routes, Verify: cfg.Verify, Functions: map[string]Invoker{}}
	for _, fn := range StackFunctions {
		bin, err := Build(ctx, cfg.Root, "./functions/"+fn, runtime.GOARCH, filepath.Join(cfg.DataDir, fn))
		if err != nil {
			return nil, err
		}
		em, err := start(ctx, fn, bin, s.Fixture)
		if err != nil {
			return nil, err
		}
		s.close = append(s.close, func() { em.Close() })
		api.Functions[fn] = em
	}
	apiSrv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go apiSrv.Serve(cfg.APIListener)
	s.close = append(s.close, func() { apiSrv.Close() })
	s.Sim.Start(context.WithoutCancel(ctx)) // stopped by Sim.Close
	return s, nil
}

// Close stops the API, the functions and the simulator, in the reverse order of their start.
func (s *Stack) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
	s.close = nil
}
