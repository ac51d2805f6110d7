package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

func TestSplit(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"one":             {"whsec_a", []string{"whsec_a"}},
		"comma":           {"whsec_new,whsec_old", []string{"whsec_new", "whsec_old"}},
		"newlines, crlf":  {"whsec_new\r\nwhsec_old\n", []string{"whsec_new", "whsec_old"}},
		"spaces, empties": {" a , ,\n b ", []string{"a", "b"}},
		"empty":           {"", []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Split(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Split(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{"TWICE_STRIPE_WEBHOOK_SECRET": "whsec_x,whsec_y"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := FromEnv(lookup, map[string]EnvVar{
		"stripe":   {Name: "TWICE_STRIPE_WEBHOOK_SECRET", Default: "whsec_default"},
		"standard": {Name: "TWICE_STANDARD_WEBHOOK_SECRET", Default: "whsec_c3RhbmRhcmQ="},
		"none":     {Name: "UNSET"},
	})
	tests := map[string]struct {
		want []string
		err  error
	}{
		"stripe":   {want: []string{"whsec_x", "whsec_y"}},
		"standard": {want: []string{"whsec_c3RhbmRhcmQ="}},
		"none":     {err: ErrNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Secrets(context.Background(), name)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// motoSSM returns an SSM client for the moto server the test script started.
func motoSSM(t *testing.T) *ssm.Client {
	t.Helper()
	ep := os.Getenv("TWICE_TEST_MOTO_ENDPOINT")
	if ep == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TWICE_TEST_MOTO_ENDPOINT is unset in CI")
		}
		t.Skip("TWICE_TEST_MOTO_ENDPOINT unset: no moto server")
	}
	return ssm.New(ssm.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(ep),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   awshttp.NewBuildableClient(),
	})
}

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func put(t *testing.T, c *ssm.Client, name, value string) {
	t.Helper()
	_, err := c.PutParameter(t.Context(), &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: types.ParameterTypeSecureString, Overwrite: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSSM(t *testing.T) {
	client := motoSSM(t)
	name := fmt.Sprintf("/twice/test/%s/stripe-webhook-secret", t.Name()+time.Now().Format("150405.000000000"))
	const first, second, rotated = "whsec_FIRSTVALUE", "whsec_SECONDVALUE", "whsec_ROTATEDVALUE"
	put(t, client, name, first+","+second)

	var logs bytes.Buffer
	clk := &clock{t: time.Unix(1767225600, 0)}
	src := NewSSM(client)
	src.Now = clk.Now
	src.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := t.Context()

	steps := []struct {
		name    string
		advance time.Duration
		before  func()
		want    []string
	}{
		{name: "first read", want: []string{first, second}},
		{name: "cached: a change is not seen before Refresh", before: func() { put(t, client, name, rotated) }, advance: DefaultRefresh - time.Second, want: []string{first, second}},
		{name: "refreshed after Refresh", advance: time.Second, want: []string{rotated}},
		{name: "refresh fails: last good served", before: func() {
			if _, err := client.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)}); err != nil {
				t.Fatal(err)
			}
		}, advance: DefaultRefresh, want: []string{rotated}},
		{name: "retried after RetryAfter, recovers", before: func() { put(t, client, name, first) }, advance: DefaultRetryAfter, want: []string{first}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		clk.t = clk.t.Add(s.advance)
		got, err := src.Secrets(ctx, name)
		if err != nil || !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: got %q, %v; want %q", s.name, got, err, s.want)
		}
	}
	if !strings.Contains(logs.String(), "serving the last good value") {
		t.Fatalf("the failed refresh was not logged: %s", logs.String())
	}
	for _, v := range []string{"FIRSTVALUE", "SECONDVALUE", "ROTATEDVALUE"} {
		if strings.Contains(logs.String(), v) {
			t.Fatalf("a secret value reached the log: %s", logs.String())
		}
	}

	_, err := src.Secrets(ctx, name+"-missing")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing parameter: %v", err)
	}
	put(t, client, name+"-blank", " , ")
	if _, err := src.Secrets(ctx, name+"-blank"); !errors.Is(err, ErrEmpty) {
		t.Fatalf("blank parameter: %v", err)
	}
}

// A failing store with nothing cached is an error that names the secret and not its value.
type failing struct{ calls int }

func (f *failing) GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.calls++
	return nil, errors.New("throttled")
}

func TestSSMUnavailableWithoutCache(t *testing.T) {
	f := &failing{}
	src := NewSSM(f)
	_, err := src.Secrets(t.Context(), "/twice/stripe")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "/twice/stripe") {
		t.Fatalf("err = %v", err)
	}
	// Not cached as a failure: the next call tries again.
	_, _ = src.Secrets(t.Context(), "/twice/stripe")
	if f.calls != 2 {
		t.Fatalf("calls = %d, want 2", f.calls)
	}
}
