// Package ssmparam reads parameters from SSM Parameter Store with one SigV4-signed HTTPS call per
// read (the GetParameter action of SSM's JSON protocol), without the AWS SDK's ssm client.
//
// Why not the SDK client: its package initialisation alone took about 8 ms of every cold start
// (the ssm/schemas package builds the whole SSM API model at init, 1.4 MB of allocations) and
// added about 2 MB to each bootstrap, for the one call the functions make. The SDK's core
// module still does the signing (aws/signer/v4) and supplies credentials and the HTTP client.
//
// Client is a secrets.Getter: secrets.Cached puts the caching in front of it (read on first use,
// never at INIT; refreshed; the last good value served if a refresh fails). Errors wrap
// secrets.ErrNotFound, secrets.ErrEmpty and secrets.ErrUnavailable and never contain a value.
//
//	src := &secrets.Cached{Getter: ssmparam.New(cfg)}
//	keys, err := src.Secrets(ctx, "/twice/prod/stripe-api-key")
package ssmparam
