package recovery_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/stepfunctions"
	"github.com/runtwice/twice/shared/store"
)

// throttled answers the first n StartExecution calls as Step Functions does when throttled.
type throttled struct {
	stepfunctions.StartExecutionAPI
	mu     sync.Mutex
	n      int
	failed int
}

func (t *throttled) StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	t.mu.Lock()
	if t.n > 0 {
		t.n--
		t.failed++
		t.mu.Unlock()
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	}
	t.mu.Unlock()
	return t.StartExecutionAPI.StartExecution(ctx, in, opts...)
}

// motoMachine is a Step Functions client on moto and the recovery machine created there for t;
// without moto the test skips (and fails under CI).
func motoMachine(t *testing.T) (*sfn.Client, *sfn.CreateStateMachineOutput) {
	t.Helper()
	endpoint := os.Getenv("TWICE_TEST_MOTO_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TWICE_TEST_MOTO_ENDPOINT is not set")
		}
		t.Skip("TWICE_TEST_MOTO_ENDPOINT is not set")
	}
	client := sfn.New(sfn.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint), HTTPClient: awshttp.NewBuildableClient()})
	created, err := client.CreateStateMachine(context.Background(), &sfn.CreateStateMachineInput{
		Name:       aws.String("payment-recovery-" + strings.ReplaceAll(t.Name(), "/", "-")),
		Definition: aws.String(string(definition(t))),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/payment-recovery"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, created
}

// TestOutboxStartsRecoveryOnceOnMoto: the decline's recovery start is an outbox message committed
// with the payment; StartExecution on moto's Step Functions fails five times (throttled), the
// relay retries it with backoff on a fake clock, and moto ends with exactly one execution.
func TestOutboxStartsRecoveryOnceOnMoto(t *testing.T) {
	ctx := context.Background()
	client, created := motoMachine(t)
	api := &throttled{StartExecutionAPI: client, n: 5}
	c := clock.NewFake(t0)
	_, st, _ := newSteps(t, recoverytest.NewProvider(c.Now), c)
	svc := &payments.Service{Store: st, Log: discard(),
		OnDecline: &recovery.Recoverer{Starter: &stepfunctions.Starter{Client: api, StateMachineArn: aws.ToString(created.StateMachineArn)}, Log: discard()}}
	relay := &outbox.Relay{Store: st, Handlers: svc.FollowOns(), Now: c.Now, Rand: rand.New(rand.NewPCG(5, 6)), Log: discard()}

	p := payments.Payment{ID: "pay_outbox_moto", Invoice: "inv_outbox_moto", Status: provider.StatusDeclined, CreatedAt: t0, UpdatedAt: t0,
		Version: payments.VersionAt(t0, provider.StatusDeclined)}
	pw, err := p.Put()
	if err != nil {
		t.Fatal(err)
	}
	mw, err := payments.RecoveryMessage(p.ID, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Transact(ctx, pw, mw); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 50 {
			t.Fatal("the recovery never started")
		}
		delivered, _, err := relay.Drain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if delivered == 1 {
			break
		}
		c.Advance(time.Minute)
	}
	if _, err := st.Get(ctx, outbox.Table, mw.Put.PK, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered message still in the outbox: %v", err)
	}
	list, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: created.StateMachineArn})
	if err != nil {
		t.Fatal(err)
	}
	if api.failed != 5 || len(list.Executions) != 1 || aws.ToString(list.Executions[0].Name) != "inv_outbox_moto-r1" {
		t.Fatalf("%d throttled starts, executions %+v; want 5 and one inv_outbox_moto-r1", api.failed, list.Executions)
	}
}
