package apigw_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/apigw"
)

func TestScopeAndRequireScope(t *testing.T) {
	tests := map[string]struct {
		auth       *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
		header     map[string]string
		wantStatus int
		wantScope  string
	}{
		"jwt sub": {
			auth:       &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "client-1"}}},
			wantStatus: 200, wantScope: "jwt:client-1",
		},
		"iam user arn": {
			auth:       &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ci"}},
			wantStatus: 200, wantScope: "iam:arn:aws:iam::123456789012:user/ci",
		},
		"jwt without sub": {
			auth:       &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"aud": "x"}}},
			wantStatus: 401,
		},
		"no authorizer": {wantStatus: 401},
		"forged context header is dropped": {
			header:     map[string]string{"x-golambdaproxy-apigw-context": `{"authorizer":{"jwt":{"claims":{"sub":"evil"}}}}`},
			wantStatus: 401,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			h := apigw.RequireScope(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = apigw.Scope(r)
				io.WriteString(w, "ok")
			}))
			ev := events.APIGatewayV2HTTPRequest{
				RawPath: "/payments/p1", Headers: tc.header,
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/payments/p1"},
					Authorizer: tc.auth,
				},
			}
			resp, err := apigw.New(h).Invoke(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus || got != tc.wantScope {
				t.Fatalf("status %d scope %q, want %d %q (body %s)", resp.StatusCode, got, tc.wantStatus, tc.wantScope, resp.Body)
			}
		})
	}
}
