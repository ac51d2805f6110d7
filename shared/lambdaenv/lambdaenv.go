package lambdaenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/metrics"
)

// ErrMissing: a required environment variable is unset or empty.
var ErrMissing = errors.New("lambdaenv: missing environment variable")

// Env reads required variables and collects every missing one, so a misconfigured function
// names all its gaps in one log line.
type Env struct {
	Lookup  func(string) (string, bool) // default os.LookupEnv
	missing []string
}

// Get returns the variable's value, noting it as missing when unset or empty.
func (e *Env) Get(name string) string {
	lookup := e.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(name)
	if v == "" {
		e.missing = append(e.missing, name)
	}
	return v
}

// Optional returns the variable's value, or def when unset or empty.
func (e *Env) Optional(name, def string) string {
	lookup := e.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if v, _ := lookup(name); v != "" {
		return v
	}
	return def
}

// Tables maps each logical store table to its physical name from TWICE_TABLE_<LOGICAL>
// (upper case), the map dynamo.New takes.
func (e *Env) Tables(logical ...string) map[string]string {
	m := make(map[string]string, len(logical))
	for _, l := range logical {
		m[l] = e.Get(TableVar(l))
	}
	return m
}

// Err reports every missing variable, wrapping ErrMissing; nil when none is.
func (e *Env) Err() error {
	if len(e.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMissing, strings.Join(e.missing, ", "))
}

// TableVar is the variable naming a logical table's physical name.
func TableVar(logical string) string { return "TWICE_TABLE_" + strings.ToUpper(logical) }

// AWS builds the SDK configuration from what Lambda gives a function: the region, the execution
// role's credentials in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, and
// AWS_ENDPOINT_URL[_<SERVICE>] overrides (the emulator tests point functions at DynamoDB Local
// and moto with these). It reads no file and makes no call.
//
// It does not use config.LoadDefaultConfig on purpose: that package links the SSO, SSO-OIDC, STS,
// sign-in, IMDS and process credential providers, whose package initialisation and size are a
// third of a function's INIT (README, Performance), for sources a Lambda function never has.
// Lambda's environment credentials are valid for the life of the execution environment, which
// is what LoadDefaultConfig's environment provider assumes too. Every client built from it
// retries with NewRetryer's policy.
func AWS(ctx context.Context) (aws.Config, error) {
	return awsFrom(os.LookupEnv)
}

func awsFrom(lookup func(string) (string, bool)) (aws.Config, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	region := get("AWS_REGION")
	if region == "" {
		region = get("AWS_DEFAULT_REGION")
	}
	key, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")
	if region == "" || key == "" || secret == "" {
		return aws.Config{}, fmt.Errorf("%w: AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set by Lambda", ErrMissing)
	}
	cfg := aws.Config{
		Region:        region,
		Credentials:   aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, get("AWS_SESSION_TOKEN"))),
		HTTPClient:    awshttp.NewBuildableClient(),
		ConfigSources: []any{endpoints(lookup)},
		// Each client gets its own retryer and so its own retry quota, as the SDK's default.
		Retryer: func() aws.Retryer { return NewRetryer(Retry{}) },
	}
	if v := get("AWS_ENDPOINT_URL"); v != "" {
		cfg.BaseEndpoint = aws.String(v)
	}
	return cfg, nil
}

// endpoints answers a client's AWS_ENDPOINT_URL_<SERVICE> lookup, the name the SDK's own
// environment source uses: the service id in upper case with spaces as underscores.
type endpoints func(string) (string, bool)

func (e endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v, ok := e("AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(sdkID, " ", "_")))
	return v, ok && v != "", nil
}

// DynamoDB builds the DynamoDB client. Response checksum validation is off only when an
// endpoint override points the function at DynamoDB Local (the emulator tests), which sends
// no x-amz-crc32 on errors and would log a WARN for every failed condition.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	_, local := os.LookupEnv("AWS_ENDPOINT_URL_DYNAMODB")
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = local
	})
}

// EnvStage is the deployment stage (template.yaml's Stage), the Stage dimension of every
// metric.
const EnvStage = "TWICE_STAGE"

// Metrics is the EMF writer of a function: stdout, namespace Twice, the stage from
// TWICE_STAGE.
func (e *Env) Metrics() *metrics.EMF {
	return &metrics.EMF{W: os.Stdout, Stage: e.Optional(EnvStage, "")}
}
