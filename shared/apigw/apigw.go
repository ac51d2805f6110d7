package apigw

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/runtwice/twice/shared/problem"
)

// Scope names the authenticated caller of r: "jwt:" + the token's sub claim, or "iam:" + the
// caller's user ARN. The prefix keeps an IAM principal and a JWT subject that happen to be equal
// strings in different scopes. It is "" when API Gateway authenticated nobody (a route without
// an authorizer) or r did not come through API Gateway.
func Scope(r *http.Request) string {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil {
		return ""
	}
	a := rc.Authorizer
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return "jwt:" + a.JWT.Claims["sub"]
	}
	if a.IAM != nil && a.IAM.UserARN != "" {
		return "iam:" + a.IAM.UserARN
	}
	return ""
}

// RequireScope answers 401 (problem+json) to a request with no Scope, so a handler that keys
// records by caller never sees an anonymous one.
func RequireScope(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Scope(r) == "" {
			problem.Error(w, http.StatusUnauthorized, "This route needs an authenticated caller.")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Adapter is a Lambda handler for HTTP API events that serves them with an http.Handler.
type Adapter struct{ proxy *httpadapter.HandlerAdapterV2 }

// New returns an Adapter serving h.
func New(h http.Handler) *Adapter { return &Adapter{proxy: httpadapter.NewV2(h)} }

// Invoke is the Lambda handler: pass it to lambda.Start. The request's context carries the
// Lambda deadline (so idempotency locks follow it) and the API Gateway request context (Scope).
func (a *Adapter) Invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	// The proxy copies the request context into a header for its header-based accessor; a
	// client could send that header itself, so drop any copy before conversion. Scope reads the
	// context value, which only the proxy sets.
	for k := range ev.Headers {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(core.APIGwContextHeader) ||
			http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(core.APIGwStageVarsHeader) {
			delete(ev.Headers, k)
		}
	}
	return a.proxy.ProxyWithContext(ctx, ev)
}
