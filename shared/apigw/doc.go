// Package apigw serves an http.Handler behind API Gateway HTTP APIs (payload format 2.0) in
// Lambda, and names the caller a request came from.
//
// The event-to-request conversion is aws-lambda-go-api-proxy's httpadapter; this package adds
// what twice needs around it: the caller's scope from the authorizer (a JWT's sub claim, or an
// IAM caller's user ARN), and a guard that refuses a request with no authenticated caller, so
// an API deployed without an authorizer fails closed instead of putting everyone in one scope.
//
//	api := apigw.New(service.Handler(apigw.Scope))
//	lambda.Start(api.Invoke)
package apigw
