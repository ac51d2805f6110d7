package rie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/lambdaenv"
)

// TableLayout is how template.yaml declares each logical table: a sort key, the gsi1 index.
var TableLayout = map[string]struct{ SortKey, Index bool }{
	"idempotency":       {},
	"payments":          {Index: true},
	"webhook_events":    {},
	"attempts":          {SortKey: true},
	"deadletters":       {Index: true},
	"recon_differences": {},
	"recon_runs":        {Index: true},
	"outbox":            {Index: true},
}

// Region and credentials every emulated function and fixture client uses.
const (
	Region    = "us-east-1"
	accessKey = "test"
	secretKey = "test"
)

// Secrets the fixture stores; the Stripe key is the one the caller's simulator accepts.
type Secrets struct {
	StripeAPIKey          string
	StripeWebhookSecret   string
	StandardWebhookSecret string
}

// Fixture is one set of local resources, named with a unique prefix so runs never collide.
type Fixture struct {
	Prefix    string
	DynamoDB  string // DynamoDB Local endpoint
	Moto      string // moto_server endpoint
	StripeAPI string // TWICE_STRIPE_API_BASE for the functions

	Tables        map[string]string // logical -> physical
	QueueURLs     map[string]string // webhooks, webhooks-dlq, resolve, resolve-dlq
	Params        map[string]string // stripe-api-key, stripe-webhook-secret, standard-webhook-secret -> name
	StateMachine  string
	MotoConfig    aws.Config
	DynamoDBAdmin dynamo.TableAdmin
}

func motoConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")),
		HTTPClient:   awshttp.NewBuildableClient(),
		BaseEndpoint: aws.String(endpoint),
	}
}

// NewFixture creates every table, queue, parameter and the state machine. root is the module
// root (for statemachines/). It does not delete them: DynamoDB Local runs in memory and moto is
// per test run, and the prefix keeps runs apart.
func NewFixture(ctx context.Context, root, prefix, dynamoEndpoint, motoEndpoint, stripeAPI string, sec Secrets) (*Fixture, error) {
	f, err := NewResources(ctx, root, prefix, dynamoEndpoint, motoEndpoint, stripeAPI)
	if err != nil {
		return nil, err
	}
	p := ssm.NewFromConfig(f.MotoConfig)
	for key, val := range map[string]string{"stripe-api-key": sec.StripeAPIKey, "stripe-webhook-secret": sec.StripeWebhookSecret,
		"standard-webhook-secret": sec.StandardWebhookSecret} {
		name := "/" + prefix + "/" + key
		if _, err := p.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(val),
			Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
			return nil, fmt.Errorf("rie: put parameter: %w", err)
		}
		f.Params[key] = name
	}
	return f, nil
}

// NewResources is NewFixture without the SSM parameters, for a caller whose parameters an
// operator created (cmd/stack: the ones docs/deploy.md creates), who then fills Params in.
func NewResources(ctx context.Context, root, prefix, dynamoEndpoint, motoEndpoint, stripeAPI string) (*Fixture, error) {
	f := &Fixture{Prefix: prefix, DynamoDB: dynamoEndpoint, Moto: motoEndpoint, StripeAPI: stripeAPI,
		Tables: map[string]string{}, QueueURLs: map[string]string{}, Params: map[string]string{},
		MotoConfig: motoConfig(motoEndpoint)}
	ddb := dynamo.NewClient(dynamoEndpoint)
	f.DynamoDBAdmin = ddb
	for logical, l := range TableLayout {
		name := prefix + "-" + strings.ReplaceAll(logical, "_", "-")
		if err := dynamo.CreateTable(ctx, ddb, name, l.SortKey, l.Index); err != nil {
			return nil, err
		}
		f.Tables[logical] = name
	}

	q := sqs.NewFromConfig(f.MotoConfig)
	for _, base := range []string{"webhooks", "resolve"} {
		dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-" + base + "-dlq")})
		if err != nil {
			return nil, fmt.Errorf("rie: create queue: %w", err)
		}
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return nil, err
		}
		redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": attrs.Attributes["QueueArn"], "maxReceiveCount": 5})
		main, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-" + base),
			Attributes: map[string]string{"RedrivePolicy": string(redrive), "VisibilityTimeout": "180"}})
		if err != nil {
			return nil, fmt.Errorf("rie: create queue: %w", err)
		}
		f.QueueURLs[base] = *main.QueueUrl
		f.QueueURLs[base+"-dlq"] = *dlq.QueueUrl
	}

	// The payments bus the relay publishes changes to (template.yaml's PaymentsBus).
	// A fixture made again under the same prefix finds it there, as it finds its tables.
	var exists *ebtypes.ResourceAlreadyExistsException
	if _, err := eventbridge.NewFromConfig(f.MotoConfig).CreateEventBus(ctx, &eventbridge.CreateEventBusInput{
		Name: aws.String(f.EventBus())}); err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("rie: create event bus: %w", err)
	}

	def, err := os.ReadFile(filepath.Join(root, "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		return nil, err
	}
	stepsARN := "arn:aws:lambda:" + Region + ":123456789012:function:" + prefix + "-recovery-steps"
	sm, err := sfn.NewFromConfig(f.MotoConfig).CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
		Name:       aws.String(prefix + "-payment-recovery"),
		Definition: aws.String(strings.ReplaceAll(string(def), "${RecoveryStepsFunctionArn}", stepsARN)),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/" + prefix + "-recovery"),
	})
	if err != nil {
		return nil, fmt.Errorf("rie: create state machine: %w", err)
	}
	f.StateMachine = *sm.StateMachineArn
	return f, nil
}

// EventBus is the name of the fixture's payments bus.
func (f *Fixture) EventBus() string { return f.Prefix + "-payments" }

// Env is the environment of every function as template.yaml sets it, aimed at the local
// servers; extra entries ("K=V") are appended.
func (f *Fixture) Env(extra ...string) []string {
	env := []string{
		"AWS_REGION=" + Region, "AWS_DEFAULT_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey,
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + f.DynamoDB,
		"AWS_ENDPOINT_URL_SQS=" + f.Moto, "AWS_ENDPOINT_URL_SSM=" + f.Moto, "AWS_ENDPOINT_URL_SFN=" + f.Moto,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"TWICE_RESOLVE_QUEUE_URL=" + f.QueueURLs["resolve"],
		"TWICE_WEBHOOK_QUEUE_URL=" + f.QueueURLs["webhooks"],
		"TWICE_STRIPE_API_KEY_PARAM=" + f.Params["stripe-api-key"],
		"TWICE_STRIPE_WEBHOOK_SECRET_PARAM=" + f.Params["stripe-webhook-secret"],
		"TWICE_STANDARD_WEBHOOK_SECRET_PARAM=" + f.Params["standard-webhook-secret"],
		"TWICE_STRIPE_API_BASE=" + f.StripeAPI,
		"TWICE_RECOVERY_STATE_MACHINE_ARN=" + f.StateMachine,
		"TWICE_IDEMPOTENCY_RETENTION_DAYS=7",
		"TWICE_STAGE=" + f.Prefix,
		"TWICE_EVENT_BUS_NAME=" + f.EventBus(), "AWS_ENDPOINT_URL_EVENTBRIDGE=" + f.Moto,
	}
	for logical, physical := range f.Tables {
		env = append(env, lambdaenv.TableVar(logical)+"="+physical)
	}
	return append(env, extra...)
}
