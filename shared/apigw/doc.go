// Package apigw serves an http.Handler behind API Gateway HTTP APIs (payload format 2.0) in
// Lambda, and names the caller a request came from.
//
// Adapter converts each event into the *http.Request API Gateway received and the handler's
// response into the Lambda answer. It is written here rather than taken from
// aws-lambda-go-api-proxy because that adapter splits every header value on commas, which
// breaks signature headers (Stripe-Signature "t=...,v1=...", Standard Webhooks
// "v1,<base64>") and any Idempotency-Key with a comma in it.
//
// Scope names the caller from the authorizer (a JWT's sub claim, or an IAM caller's user
// ARN), and RequireScope refuses a request with no authenticated caller, so an API deployed
// without an authorizer fails closed instead of putting everyone in one scope.
//
//	api := &apigw.Adapter{Handler: apigw.RequireScope(service.Handler(apigw.Scope))}
//	lambda.Start(api.Invoke)
package apigw
