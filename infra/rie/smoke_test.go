package rie_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

// TestSmokeUnderEmulator is the last step of docs/deploy.md in the emulator form (rie.Stack, which
// cmd/stack serves): payments-api, webhook-ingest and operator-api under aws-lambda-rie behind
// one HTTP API stand-in with template.yaml's routes, authorizer and scopes, on DynamoDB Local
// and moto (the SSM parameters, a rotating webhook secret among them, are in moto); the Stripe
// simulator takes the stored key and sends webhooks signed with the stored secret to the API's
// /webhooks/stripe, as a Stripe endpoint would. The built twicectl binary runs
// `smoke` with a payments token and an operator token (tokens the authorizer stand-in knows,
// with the twice/payments and twice/ops scopes): every check passes. Given the payments token
// as the operator's, /ops answers 403 and smoke exits 1.
func TestSmokeUnderEmulator(t *testing.T) {
	rieBin := testenv.RIE(t)
	ddb := testenv.DynamoDBEndpoint(t)
	moto := testenv.MotoEndpoint(t)
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The JWT authorizer's stand-in: API Gateway has checked signature, issuer, audience and
	// expiry; the function sees the claims. Scopes as the guide's issuer grants them.
	tokens := map[string]map[string]any{
		"payments-client-jwt": {"sub": "smoke-client", "scope": "twice/payments"},
		"operator-jwt":        {"sub": "ops-client", "scope": "twice/ops"},
	}
	var e *env
	stack, err := rie.StartStack(ctx, rie.StackConfig{Root: root, RIE: rieBin, APIListener: apiLn, SimListener: simLn, DataDir: t.TempDir(),
		Fixture: func(ctx context.Context, simURL string) (*rie.Fixture, error) {
			prefix := "smoke-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
			fx, err := rie.NewFixture(ctx, root, prefix, ddb, moto, simURL, rie.Secrets{
				StripeAPIKey: "rk_test_smoke_restricted", StripeWebhookSecret: stripeWebhookSecret + ",whsec_b2xkLXNlY3JldA",
				StandardWebhookSecret: "whsec_dHdpY2UtbG9jYWwtc3RhbmRhcmQtc2VjcmV0",
			})
			e = &env{root: root, rie: rieBin, fx: fx, calls: map[string][]*rie.Recorder{}, ran: map[string][]*rie.Emulator{}}
			return fx, err
		},
		Params: []string{"JwtIssuer=https://issuer.smoke.invalid/", "JwtAudience=twice-smoke"},
		Verify: func(_ context.Context, _ rie.Route, tok string) (map[string]any, error) {
			if c, ok := tokens[tok]; ok {
				return c, nil
			}
			return nil, errors.New("not a token the issuer signed")
		},
		// Each function as the other emulator tests start it (its output on failure).
		Start: func(_ context.Context, fn, bootstrap string, _ *rie.Fixture) (*rie.Emulator, error) {
			return e.startBuilt(t, fn, bootstrap), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	apiURL := stack.URL

	bin := filepath.Join(t.TempDir(), "twicectl")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./infra/twicectl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./infra/twicectl: %v\n%s", err, out)
	}
	smoke := func(args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--url", apiURL}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // nothing of the developer's TWICE_* leaks in
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}

	t.Run("green", func(t *testing.T) {
		code, out := smoke("--token", "operator-jwt", "smoke", "--payments-token", "payments-client-jwt", "--wait", "60s")
		t.Log("\n" + out)
		for _, want := range []string{"ok   ops answers", "ok   payment created pay_", "ok   payment replayed", "ok   provider mode: test",
			"ok   webhook delivered evt_", "smoke: all checks passed"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the output", want)
			}
		}
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("a payments token is not an operator's", func(t *testing.T) {
		code, out := smoke("--token", "payments-client-jwt", "smoke", "--payments-token", "payments-client-jwt", "--wait", "1s")
		t.Log("\n" + out)
		if code != 1 || !strings.Contains(out, "FAIL ops answers: GET /ops/deadletters?limit=1 403") {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("no payments token: the authorizer answers 401", func(t *testing.T) {
		code, out := smoke("--token", "operator-jwt", "smoke", "--wait", "1s")
		t.Log("\n" + out)
		if code != 1 || !strings.Contains(out, "FAIL payment created: POST /payments key smoke-") || !strings.Contains(out, ": 401") {
			t.Fatalf("exit %d", code)
		}
	})
}
