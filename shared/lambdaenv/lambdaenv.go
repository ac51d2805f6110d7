package lambdaenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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

// AWS loads the SDK configuration from the environment (region, credentials of the execution
// role, AWS_ENDPOINT_URL_* overrides). It reads no file that Lambda lacks and makes no call.
// The HTTP client is the SDK's buildable one: a plain *http.Client panics when AWS_CA_BUNDLE
// is set.
func AWS(ctx context.Context) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx, config.WithHTTPClient(awshttp.NewBuildableClient()))
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

// Fatal logs err and exits non-zero: the one place a main gives up, during INIT, where Lambda
// reports the failure and retries the cold start.
func Fatal(log *slog.Logger, msg string, err error) {
	log.Error(msg, "error", err)
	os.Exit(1)
}
