// Package ssmparam serves secrets from SSM Parameter Store with one SigV4-signed HTTPS call per
// read (the GetParameter action of SSM's JSON protocol), without the AWS SDK's ssm client.
//
// Why not the SDK client: its package initialisation alone took about 8 ms of every cold start
// (the ssm/schemas package builds the whole SSM API model at init, 1.4 MB of allocations) and
// added about 2 MB to each bootstrap, for the one call the functions make. The SDK's core
// module still does the signing (aws/signer/v4) and supplies credentials and the HTTP client.
//
// Source has the semantics of secrets.SSM: each name is read on first use (never at INIT),
// cached for Refresh, and the last good value is served if a refresh fails, with the next try
// after RetryAfter. Values are split as secrets.Split splits them; errors wrap ErrNotFound,
// ErrEmpty and ErrUnavailable and never contain a value. The package does not import package
// secrets, which links the SDK's ssm client.
//
//	src := ssmparam.NewSource(ssmparam.New(cfg))
//	keys, err := src.Secrets(ctx, "/twice/prod/stripe-api-key")
package ssmparam
