package lambdaenv_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runtwice/twice/shared/lambdaenv"
)

// lambdaVars sets what Lambda gives a function and clears what it does not.
func lambdaVars(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SFN"} {
		t.Setenv(k, vars[k])
	}
}

// TestAWSSignsForTheExecutionRole makes a real DynamoDB call through the configuration: it
// reaches the AWS_ENDPOINT_URL_DYNAMODB override, signed with the environment's credentials
// for the region, session token included.
func TestAWSSignsForTheExecutionRole(t *testing.T) {
	var auth, token string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, token = r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token")
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{"TableNames":["payments"]}`))
	}))
	defer srv.Close()
	lambdaVars(t, map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDROLE",
		"AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "session", "AWS_ENDPOINT_URL_DYNAMODB": srv.URL})
	cfg, err := lambdaenv.AWS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambdaenv.DynamoDB(cfg).ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.TableNames) != 1 || out.TableNames[0] != "payments" {
		t.Fatalf("tables %v", out.TableNames)
	}
	if !strings.Contains(auth, "Credential=AKIDROLE/") || !strings.Contains(auth, "/eu-west-1/dynamodb/") || token != "session" {
		t.Fatalf("Authorization %q, token %q", auth, token)
	}
}

// TestAWSEndpoints: each service reads its own AWS_ENDPOINT_URL_<SERVICE>, then the global
// AWS_ENDPOINT_URL, as the SDK's environment source does; with neither, the service's own.
func TestAWSEndpoints(t *testing.T) {
	lambdaVars(t, map[string]string{"AWS_DEFAULT_REGION": "us-east-2", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
		"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:1/sqs", "AWS_ENDPOINT_URL": "http://127.0.0.1:1/all"})
	cfg, err := lambdaenv.AWS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "us-east-2" {
		t.Fatalf("region %q, want AWS_DEFAULT_REGION's", cfg.Region)
	}
	if got := sqs.NewFromConfig(cfg).Options().BaseEndpoint; got == nil || *got != "http://127.0.0.1:1/sqs" {
		t.Fatalf("sqs endpoint %v", got)
	}
	if got := sfn.NewFromConfig(cfg).Options().BaseEndpoint; got == nil || *got != "http://127.0.0.1:1/all" {
		t.Fatalf("sfn endpoint %v", got)
	}
	lambdaVars(t, map[string]string{"AWS_REGION": "us-east-2", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
	cfg, err = lambdaenv.AWS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := dynamodb.NewFromConfig(cfg).Options().BaseEndpoint; got != nil {
		t.Fatalf("dynamodb endpoint %q with no override", *got)
	}
}

// TestAWSMissing: a function without a region or credentials fails its INIT and names them.
func TestAWSMissing(t *testing.T) {
	lambdaVars(t, map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "k"})
	_, err := lambdaenv.AWS(t.Context())
	if !errors.Is(err, lambdaenv.ErrMissing) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("err %v", err)
	}
}

// TestAWSRetriesInOnePlace: every client built from the configuration takes the functions'
// retry policy, not the SDK's default of three attempts.
func TestAWSRetriesInOnePlace(t *testing.T) {
	lambdaVars(t, map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
	cfg, err := lambdaenv.AWS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{
		"dynamodb": lambdaenv.DynamoDB(cfg).Options().Retryer.MaxAttempts(),
		"sqs":      sqs.NewFromConfig(cfg).Options().Retryer.MaxAttempts(),
		"sfn":      sfn.NewFromConfig(cfg).Options().Retryer.MaxAttempts(),
	} {
		if n != lambdaenv.RetryMaxAttempts {
			t.Errorf("%s: %d attempts, want %d", name, n, lambdaenv.RetryMaxAttempts)
		}
	}
}
