package testenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The environment variables scripts/test.sh exports.
const (
	EnvDynamoDB       = "TWICE_TEST_DYNAMODB_ENDPOINT"
	EnvMoto           = "TWICE_TEST_MOTO_ENDPOINT"
	EnvStripeMock     = "TWICE_TEST_STRIPE_MOCK"
	EnvRIE            = "TWICE_TEST_RIE"
	EnvASLValidator   = "TWICE_TEST_ASL_VALIDATOR"
	EnvChromium       = "TWICE_TEST_CHROMIUM"
	EnvRequireServers = "TWICE_TEST_REQUIRE_SERVERS"
)

// Region is the region every test client uses; the local servers accept any.
const Region = "us-east-1"

// StripeMockKey is a secret key stripe-mock accepts (it checks only the shape).
const StripeMockKey = "sk_test_123"

// Required reports whether a missing server fails the test instead of skipping it.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv(EnvRequireServers) == "1"
}

// lookup returns the value of env, or skips (fails when Required) naming what is missing.
func lookup(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	msg := fmt.Sprintf("testenv: %s is not set: %s is not available (run `make test`, which starts it)", env, what)
	if Required() {
		t.Fatal(msg + "; failing because CI=true or " + EnvRequireServers + "=1")
	}
	t.Skip(msg)
	return ""
}

// DynamoDBEndpoint returns the base URL of DynamoDB Local.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvDynamoDB, "DynamoDB Local")
}

// MotoEndpoint returns the base URL of moto_server.
func MotoEndpoint(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvMoto, "moto_server")
}

// StripeMockURL returns the base URL of stripe-mock (plain HTTP); authenticate with
// StripeMockKey.
func StripeMockURL(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvStripeMock, "stripe-mock")
}

// RIE returns the path of the aws-lambda-rie binary.
func RIE(t testing.TB) string {
	t.Helper()
	return executable(t, lookup(t, EnvRIE, "the Lambda runtime interface emulator"))
}

// ASLValidator returns the path of the asl-validator command.
func ASLValidator(t testing.TB) string {
	t.Helper()
	return executable(t, lookup(t, EnvASLValidator, "asl-validator"))
}

// Chromium returns the path of the chromium binary for browser tests.
func Chromium(t testing.TB) string {
	t.Helper()
	return executable(t, lookup(t, EnvChromium, "chromium"))
}

// executable fails the test when a configured path is not an executable file: a wrong
// path is a broken set-up, never a reason to skip.
func executable(t testing.TB, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("testenv: %s is not an executable file", path)
	}
	return path
}

// config is an aws.Config for a local server: static credentials, a fixed region and nothing
// read from the environment or ~/.aws, so a developer's AWS settings never leak into tests.
// The HTTP client is the SDK's buildable one: a plain *http.Client makes the SDK panic when
// AWS_CA_BUNDLE is set.
func config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("test", "test", "")),
		HTTPClient:   awshttp.NewBuildableClient(),
		BaseEndpoint: aws.String(endpoint),
	}
}

// MotoConfig returns an aws.Config aimed at moto_server, for sqs, sfn, ssm, secretsmanager and
// scheduler clients (e.g. sqs.NewFromConfig(testenv.MotoConfig(t))).
func MotoConfig(t testing.TB) aws.Config {
	t.Helper()
	return config(MotoEndpoint(t))
}

// DynamoDBConfig returns an aws.Config aimed at DynamoDB Local. Prefer DynamoDB, which also
// turns off the response checksum check DynamoDB Local cannot satisfy.
func DynamoDBConfig(t testing.TB) aws.Config {
	t.Helper()
	return config(DynamoDBEndpoint(t))
}

// DynamoDB returns a client for DynamoDB Local. It does not validate response checksums:
// DynamoDB Local sends no x-amz-crc32 on errors, and the SDK would log a warning on every
// ConditionalCheckFailed (aws/aws-sdk-go-v2#3545). optFns apply after that, e.g. to add a
// call-counting middleware.
func DynamoDB(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	fns := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(DynamoDBConfig(t), fns...)
}

// Schema says which keys a test table has. Every table has a string hash key "pk".
type Schema struct {
	// SortKey adds a string range key "sk".
	SortKey bool
	// GSI1 adds the global secondary index "gsi1" on gsi1pk (hash) and gsi1sk (range), both
	// strings, projecting all attributes.
	GSI1 bool
}

// tableSeq makes table names unique within the process; the pid in the name makes them
// unique across the test binaries that go test runs at the same time.
var tableSeq atomic.Int64

var unsafeTableChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// TableName returns a table name unique to this test, process and call.
func TableName(t testing.TB) string {
	t.Helper()
	base := unsafeTableChars.ReplaceAllString(t.Name(), "_")
	if len(base) > 180 {
		base = base[:180]
	}
	return base + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(tableSeq.Add(1), 10)
}

// CreateTable creates an on-demand table with a name unique to this test, waits until it is
// active and deletes it when the test ends. It returns the table name.
func CreateTable(t testing.TB, db *dynamodb.Client, s Schema) string {
	t.Helper()
	name := TableName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.CreateTable(ctx, s.input(name)); err != nil {
		t.Fatalf("testenv: create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("testenv: delete table %s: %v", name, err)
		}
	})
	// DynamoDB Local creates tables at once; real DynamoDB takes seconds.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("testenv: wait for table %s: %v", name, err)
	}
	return name
}

func (s Schema) input(name string) *dynamodb.CreateTableInput {
	str := ddbtypes.ScalarAttributeTypeS
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: str},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
		},
	}
	if s.SortKey {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			ddbtypes.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: str})
		in.KeySchema = append(in.KeySchema,
			ddbtypes.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange})
	}
	if s.GSI1 {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			ddbtypes.AttributeDefinition{AttributeName: aws.String("gsi1pk"), AttributeType: str},
			ddbtypes.AttributeDefinition{AttributeName: aws.String("gsi1sk"), AttributeType: str})
		in.GlobalSecondaryIndexes = []ddbtypes.GlobalSecondaryIndex{{
			IndexName: aws.String("gsi1"),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: aws.String("gsi1pk"), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: aws.String("gsi1sk"), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll},
		}}
	}
	return in
}
