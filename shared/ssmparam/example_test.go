package ssmparam_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/ssmparam"
)

// secrets.Cached over a Client reads a parameter on first use and serves it from its cache afterwards. Here a
// stand-in SSM answers; in a function the endpoint is SSM's and cfg comes from
// config.LoadDefaultConfig.
func Example() {
	calls := 0
	ssm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Write([]byte(`{"Parameter":{"Name":"/twice/prod/stripe-webhook-secret","Value":"whsec_new,whsec_old"}}`))
	}))
	defer ssm.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ssm.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
		})}
	src := &secrets.Cached{Getter: ssmparam.New(cfg)}
	for range 3 {
		secrets, err := src.Secrets(context.Background(), "/twice/prod/stripe-webhook-secret")
		fmt.Println(secrets, err)
	}
	fmt.Println("calls:", calls)
	// Output:
	// [whsec_new whsec_old] <nil>
	// [whsec_new whsec_old] <nil>
	// [whsec_new whsec_old] <nil>
	// calls: 1
}
