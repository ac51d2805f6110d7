package rie

import (
	"context"
	"crypto"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// TestGatewayMatchesAsHTTPAPIs: the route API Gateway picks ("Working with routes for HTTP
// APIs"): an exact path beats a path variable, which beats a greedy {proxy+}; a route of the
// request's method beats ANY on the same path; $default only when nothing else matches.
func TestGatewayMatchesAsHTTPAPIs(t *testing.T) {
	g := &Gateway{Routes: []Route{
		{Method: "GET", Path: "/ops"},
		{Method: "ANY", Path: "/ops/{proxy+}"},
		{Method: "ANY", Path: "/ops/deadletters"},
		{Method: "ANY", Path: "/ops/deadletters/{proxy+}"},
		{Method: "GET", Path: "/ops/payments/{id}/timeline"},
		{Method: "POST", Path: "/ops/recoveries/{id}/{action}"},
		{Method: "GET", Path: "/ops/recoveries"},
		{Method: "GET", Path: "/pets/dog/1"},
		{Method: "GET", Path: "/pets/dog/{id}"},
		{Method: "GET", Path: "/pets/{proxy+}"},
		{Method: "ANY", Path: "/pets/dog/{id}"},
		{Method: "ANY", Path: "$default"},
	}}
	for name, c := range map[string]struct{ method, path, want string }{
		"exact":                               {"GET", "/pets/dog/1", "GET /pets/dog/1"},
		"variable over greedy":                {"GET", "/pets/dog/2", "GET /pets/dog/{id}"},
		"method over ANY":                     {"GET", "/pets/dog/3", "GET /pets/dog/{id}"},
		"ANY when the method differs":         {"POST", "/pets/dog/3", "ANY /pets/dog/{id}"},
		"greedy":                              {"GET", "/pets/cat/1", "GET /pets/{proxy+}"},
		"greedy needs a segment":              {"GET", "/pets", "$default"},
		"default last":                        {"DELETE", "/nothing/here", "$default"},
		"trailing slash":                      {"GET", "/ops/", "GET /ops"},
		"console page under the greedy route": {"GET", "/ops/payments/pay_1", "ANY /ops/{proxy+}"},
		"console form under the greedy route": {"POST", "/ops/payments/pay_1/recovery/stop", "ANY /ops/{proxy+}"},
		"timeline over the greedy route":      {"GET", "/ops/payments/pay_1/timeline", "GET /ops/payments/{id}/timeline"},
		"steering over the greedy route":      {"POST", "/ops/recoveries/pay_1/charge-now", "POST /ops/recoveries/{id}/{action}"},
		"steering's GET falls to the greedy":  {"GET", "/ops/recoveries/pay_1/charge-now", "ANY /ops/{proxy+}"},
		"a longer literal prefix wins":        {"POST", "/ops/deadletters/dl_1/retry", "ANY /ops/deadletters/{proxy+}"},
		"exact ANY over a greedy ANY":         {"GET", "/ops/deadletters", "ANY /ops/deadletters"},
		"exact list":                          {"GET", "/ops/recoveries", "GET /ops/recoveries"},
		"one segment too many for a variable": {"GET", "/ops/payments/pay_1/timeline/x", "ANY /ops/{proxy+}"},
		"a variable never matches empty":      {"GET", "/ops/payments//timeline", "ANY /ops/{proxy+}"},
	} {
		got, ok := g.Match(c.method, c.path)
		if !ok || got.Key() != c.want {
			t.Errorf("%s: %s %s matched %q (%v), want %q", name, c.method, c.path, got.Key(), ok, c.want)
		}
	}
	g.Routes = g.Routes[:len(g.Routes)-1]
	if r, ok := g.Match("DELETE", "/nothing/here"); ok {
		t.Errorf("without $default: matched %q", r.Key())
	}
}

type echo struct{ calls int }

func (e *echo) Invoke(context.Context, []byte) ([]byte, error) {
	e.calls++
	return []byte(`{"statusCode":200,"body":"ok"}`), nil
}

// TestGatewayAuthorizes: without a valid token, 401 {"message":"Unauthorized"}; a valid
// token with none of the route's scopes, 403 {"message":"Forbidden"}; neither reaches the
// function. A route without an authorizer takes anyone.
func TestGatewayAuthorizes(t *testing.T) {
	fn := &echo{}
	g := &Gateway{
		Routes: []Route{
			{Method: "GET", Path: "/ops/attempts", Function: "f", Authorizer: "Jwt", Scopes: []string{"twice/ops"}},
			{Method: "POST", Path: "/payments", Function: "f", Authorizer: "Jwt"},
			{Method: "POST", Path: "/webhooks/{provider}", Function: "f"},
		},
		Functions: map[string]Invoker{"f": fn},
		Verify: func(_ context.Context, _ Route, tok string) (map[string]any, error) {
			switch tok {
			case "ops":
				return map[string]any{"sub": "a", "scope": "openid twice/ops"}, nil
			case "ops-scp":
				return map[string]any{"sub": "a", "scp": []any{"twice/ops"}}, nil
			case "pay":
				return map[string]any{"sub": "b", "scope": "twice/payments"}, nil
			}
			return nil, errors.New("bad token")
		},
	}
	for name, c := range map[string]struct {
		method, path, token string
		want                int
		body                string
	}{
		"no token":                 {"GET", "/ops/attempts", "", 401, `{"message":"Unauthorized"}`},
		"bad token":                {"GET", "/ops/attempts", "forged", 401, `{"message":"Unauthorized"}`},
		"without the scope":        {"GET", "/ops/attempts", "pay", 403, `{"message":"Forbidden"}`},
		"with the scope":           {"GET", "/ops/attempts", "ops", 200, "ok"},
		"with the scope in scp":    {"GET", "/ops/attempts", "ops-scp", 200, "ok"},
		"no scope asked":           {"POST", "/payments", "pay", 200, "ok"},
		"no scope asked, no token": {"POST", "/payments", "", 401, `{"message":"Unauthorized"}`},
		"no authorizer":            {"POST", "/webhooks/stripe", "", 200, "ok"},
		"no route":                 {"GET", "/nothing", "ops", 404, `{"message":"Not Found"}`},
	} {
		before := fn.calls
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		b, _ := io.ReadAll(w.Body)
		if w.Code != c.want || string(b) != c.body {
			t.Errorf("%s: %d %s, want %d %s", name, w.Code, b, c.want, c.body)
		}
		if reached := fn.calls > before; reached != (c.want == http.StatusOK) {
			t.Errorf("%s: the function ran: %v", name, reached)
		}
		if c.want != http.StatusOK && !IsGatewayAnswer(w.Code, b) {
			t.Errorf("%s: not recognised as the gateway's answer", name)
		}
	}
}

// TestJWTVerifierChecksAudOrClientID: the stand-in's JWT check is API Gateway's. The audience
// list comes from JwtAudience split on commas, a token's aud must hold one of them, and a
// token without aud (a Cognito access token: client_id, scope, token_use) passes when its
// client_id is one; API Gateway reads client_id only when aud is absent.
func TestJWTVerifierChecksAudOrClientID(t *testing.T) {
	kp, err := mockoidc.DefaultKeypair()
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Test"
	verify := JWTVerifier(&oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{kp.PublicKey}})
	route := Route{Issuer: issuer, Audience: []string{"payments-client", "ops-client"}}
	sign := func(claims jwt.MapClaims) string {
		claims["iss"], claims["iat"], claims["exp"] = issuer, time.Now().Unix(), time.Now().Add(time.Hour).Unix()
		tok, err := kp.SignJWT(claims)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for name, c := range map[string]struct {
		claims jwt.MapClaims
		ok     bool
	}{
		"aud is one of them":             {jwt.MapClaims{"aud": "ops-client", "sub": "x"}, true},
		"aud is none of them":            {jwt.MapClaims{"aud": "someone-else", "sub": "x"}, false},
		"cognito access token":           {jwt.MapClaims{"client_id": "payments-client", "sub": "payments-client", "token_use": "access", "scope": "twice/payments"}, true},
		"cognito token of another app":   {jwt.MapClaims{"client_id": "other-client", "sub": "other-client", "token_use": "access"}, false},
		"client_id ignored when aud set": {jwt.MapClaims{"aud": "someone-else", "client_id": "ops-client", "sub": "x"}, false},
	} {
		_, err := verify(context.Background(), route, sign(c.claims))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", name, err, c.ok)
		}
	}
	other := Route{Issuer: "https://issuer.test/other", Audience: route.Audience}
	if _, err := verify(context.Background(), other, sign(jwt.MapClaims{"aud": "ops-client"})); err == nil {
		t.Error("a token of another issuer passed")
	}
}
