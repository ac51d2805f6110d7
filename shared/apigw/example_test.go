package apigw_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/apigw"
)

// A handler behind the HTTP API sees the request API Gateway received, and the caller's scope
// from the JWT authorizer. In a main: lambda.Start((&apigw.Adapter{Handler: h}).Invoke).
func Example() {
	h := apigw.RequireScope(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s for %s, signature %q", r.Method, r.URL.Path, apigw.Scope(r), r.Header.Get("Stripe-Signature"))
	}))
	ev := events.APIGatewayV2HTTPRequest{
		RawPath: "/payments/pay_1",
		Headers: map[string]string{"stripe-signature": "t=1,v1=ab"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "client-1"}},
			},
		},
	}
	resp, _ := (&apigw.Adapter{Handler: h}).Invoke(context.Background(), ev)
	fmt.Println(resp.StatusCode, resp.Body)

	ev.RequestContext.Authorizer = nil
	resp, _ = (&apigw.Adapter{Handler: h}).Invoke(context.Background(), ev)
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"])
	// Output:
	// 200 GET /payments/pay_1 for jwt:client-1, signature "t=1,v1=ab"
	// 401 application/problem+json
}
