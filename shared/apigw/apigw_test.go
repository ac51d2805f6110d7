package apigw_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
			resp, err := (&apigw.Adapter{Handler: h}).Invoke(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus || got != tc.wantScope {
				t.Fatalf("status %d scope %q, want %d %q (body %s)", resp.StatusCode, got, tc.wantStatus, tc.wantScope, resp.Body)
			}
		})
	}
}

func TestRequestAndResponse(t *testing.T) {
	ev := events.APIGatewayV2HTTPRequest{
		RawPath: "/webhooks/stripe", RawQueryString: "a=1&b=x%2Cy",
		Headers: map[string]string{"stripe-signature": "t=1,v1=abc,v1=def", "idempotency-key": "k,1", "host": "api.example.com"},
		Cookies: []string{"a=1", "b=2"},
		Body:    base64.StdEncoding.EncodeToString([]byte("raw\x00body")), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", SourceIP: "203.0.113.7"},
		},
	}
	var got struct {
		sig, key, query, cookie, host, body, method, path string
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.sig, got.key, got.query = r.Header.Get("Stripe-Signature"), r.Header.Get("Idempotency-Key"), r.URL.Query().Get("b")
		got.cookie, got.host, got.body, got.method, got.path = r.Header.Get("Cookie"), r.Host, string(b), r.Method, r.URL.Path
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "1"})
		w.Header().Add("Vary", "A")
		w.Header().Add("Vary", "B")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte{0, 1, 2})
	})
	resp, err := (&apigw.Adapter{Handler: h}).Invoke(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got.sig != "t=1,v1=abc,v1=def" || got.key != "k,1" || got.query != "x,y" || got.cookie != "a=1; b=2" ||
		got.host != "api.example.com" || got.body != "raw\x00body" || got.method != "POST" || got.path != "/webhooks/stripe" {
		t.Fatalf("request seen: %+v", got)
	}
	body, _ := base64.StdEncoding.DecodeString(resp.Body)
	if resp.StatusCode != 202 || !resp.IsBase64Encoded || string(body) != "\x00\x01\x02" || resp.Headers["Vary"] != "A,B" ||
		len(resp.Cookies) != 1 || resp.Cookies[0] != "s=1" {
		t.Fatalf("response: %+v", resp)
	}

	// JSON stays text; a bad base64 body is a 400 that never reaches the handler.
	resp, _ = (&apigw.Adapter{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		json.NewEncoder(w).Encode(map[string]int{"status": 409})
	})}).Invoke(context.Background(), events.APIGatewayV2HTTPRequest{RawPath: "/", RequestContext: ev.RequestContext})
	if resp.IsBase64Encoded || !strings.Contains(resp.Body, "409") {
		t.Fatalf("json response: %+v", resp)
	}
	bad := ev
	bad.Body = "%%%"
	resp, _ = (&apigw.Adapter{Handler: h}).Invoke(context.Background(), bad)
	if resp.StatusCode != 400 {
		t.Fatalf("bad body: %+v", resp)
	}
}

func FuzzRequest(f *testing.F) {
	f.Add("/payments", "a=1", "POST", "e30=", true)
	f.Add("/webhooks/stripe", "", "GET", "{}", false)
	f.Add("//x/../y?", "%zz", "", "", false)
	f.Fuzz(func(t *testing.T, path, query, method, body string, b64 bool) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, RawQueryString: query, Body: body, IsBase64Encoded: b64,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method}}}
		r, err := apigw.Request(context.Background(), ev)
		if err != nil {
			return
		}
		if r.Method == "" || !strings.HasPrefix(r.URL.Path, "/") && r.URL.Path != "" {
			t.Fatalf("request %s %q from %+v", r.Method, r.URL.Path, ev)
		}
		if _, ok := apigw.RequestContext(r.Context()); !ok {
			t.Fatal("no request context")
		}
	})
}
