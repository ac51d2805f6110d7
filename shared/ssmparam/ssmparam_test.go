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
// SDK client would, and maps a missing parameter to ssmparam.ErrNotFound.
func TestAgainstMoto(t *testing.T) {
	cfg := testenv.MotoConfig(t)
	ctx := t.Context()
	name := "/twice-test/param-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name),
		Value: aws.String("whsec_new,whsec_old"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	src := ssmparam.NewSource(ssmparam.New(cfg))
	got, err := src.Secrets(ctx, name)
	if err != nil || strings.Join(got, "|") != "whsec_new|whsec_old" {
		t.Fatalf("Secrets = %v, %v", got, err)
	}
	if _, err := src.Secrets(ctx, name+"-absent"); !errors.Is(err, ssmparam.ErrNotFound) {
		t.Fatalf("absent: %v, want ErrNotFound", err)
	}
}

type fakeGetter struct {
	vals  map[string]string
	err   error
	calls int
}

func (f *fakeGetter) Get(_ context.Context, name string) (string, error) {
	f.calls++
	if f.err != nil {
		return "", f.err
	}
	return f.vals[name], nil
}

func TestSourceCachesAndServesLastGood(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	g := &fakeGetter{vals: map[string]string{"k": "a,b", "blank": " , "}}
	src := ssmparam.NewSource(g)
	src.Now = func() time.Time { return now }
	ctx := context.Background()

	tests := []struct {
		name    string
		advance time.Duration
		fail    error
		want    string
		calls   int
	}{
		{name: "first read fetches", want: "a|b", calls: 1},
		{name: "within refresh is cached", advance: time.Minute, want: "a|b", calls: 1},
		{name: "failed refresh serves last good", advance: 5 * time.Minute, fail: ssmparam.ErrUnavailable, want: "a|b", calls: 2},
		{name: "retry waits RetryAfter", advance: 10 * time.Second, fail: ssmparam.ErrUnavailable, want: "a|b", calls: 2},
		{name: "after RetryAfter fetches again", advance: 30 * time.Second, want: "a|b", calls: 3},
	}
	for _, tc := range tests {
		now = now.Add(tc.advance)
		g.err = tc.fail
		got, err := src.Secrets(ctx, "k")
		if err != nil || strings.Join(got, "|") != tc.want || g.calls != tc.calls {
			t.Fatalf("%s: %v %v after %d calls", tc.name, got, err, g.calls)
		}
	}
	g.err = nil
	if _, err := src.Secrets(ctx, "blank"); !errors.Is(err, ssmparam.ErrEmpty) {
		t.Fatalf("blank: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string
		want   error
	}{
		"not found":    {400, `{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"x"}`, ssmparam.ErrNotFound},
		"throttled":    {400, `{"__type":"ThrottlingException"}`, ssmparam.ErrUnavailable},
		"server error": {500, `oops`, ssmparam.ErrUnavailable},
		"no value":     {200, `{"Parameter":{}}`, ssmparam.ErrEmpty},
		"garbage":      {200, `{`, ssmparam.ErrUnavailable},
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
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
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

func TestSplitMatchesSecrets(t *testing.T) {
	for _, v := range []string{"", "a", "a,b", " a , ,b\n", "whsec_x\r\nwhsec_y", ",,,"} {
		if got, want := strings.Join(ssmparam.Split(v), "|"), strings.Join(secrets.Split(v), "|"); got != want {
			t.Errorf("Split(%q) = %q, secrets.Split = %q", v, got, want)
		}
	}
}
