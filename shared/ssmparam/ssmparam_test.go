package ssmparam_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/ssmparam"
)

// TestAgainstMoto reads a SecureString through the signed JSON call from moto, the way the
// SDK client would, through the secrets cache, and maps a missing parameter to
// secrets.ErrNotFound.
func TestAgainstMoto(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	ctx := t.Context()
	name := "/twice-test/param-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name),
		Value: aws.String("whsec_new,whsec_old"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	src := &secrets.Cached{Getter: ssmparam.New(cfg)}
	got, err := src.Secrets(ctx, name)
	if err != nil || strings.Join(got, "|") != "whsec_new|whsec_old" {
		t.Fatalf("Secrets = %v, %v", got, err)
	}
	if _, err := src.Secrets(ctx, name+"-absent"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("absent: %v, want ErrNotFound", err)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string
		want   error
	}{
		"not found":    {400, `{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"x"}`, secrets.ErrNotFound},
		"throttled":    {400, `{"__type":"ThrottlingException"}`, secrets.ErrUnavailable},
		"server error": {500, `oops`, secrets.ErrUnavailable},
		"no value":     {200, `{"Parameter":{}}`, secrets.ErrEmpty},
		"garbage":      {200, `{`, secrets.ErrUnavailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || !strings.Contains(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
					t.Errorf("unsigned or wrong target: %v", r.Header)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Retryer: func() aws.Retryer { return aws.NopRetryer{} },
				Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: "a", SecretAccessKey: "s"}, nil
				})}
			t.Setenv("AWS_ENDPOINT_URL_SSM", "")
			t.Setenv("AWS_ENDPOINT_URL", "")
			_, err := ssmparam.New(cfg).Get(context.Background(), "/p")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}
