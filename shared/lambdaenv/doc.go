// Package lambdaenv is what a deployed function reads from its environment: the names
// template.yaml passes in (tables, queue URLs, parameter names), the AWS SDK configuration and
// clients, and where its metrics go. functions/*/main.go use it so their wiring stays a few
// lines; their logger is package logs.
//
// Environment variables, all set by template.yaml:
//
//	TWICE_TABLE_<LOGICAL>     physical DynamoDB table of a logical store table
//	                          (TWICE_TABLE_IDEMPOTENCY, TWICE_TABLE_WEBHOOK_EVENTS, ...)
//	TWICE_*_QUEUE_URL         an SQS queue URL
//	TWICE_*_PARAM             an SSM parameter name (secrets; read on first use, never at INIT)
//	TWICE_STAGE               the deployment stage, the Stage dimension of every metric
//
// Nothing here makes a network call or reads a file: AWS builds the SDK configuration from the
// environment Lambda sets (not through config.LoadDefaultConfig, whose other credential sources
// cost INIT time a function never uses), and clients connect on their first request.
//
//	env := &lambdaenv.Env{}
//	tables := env.Tables(deadletter.Table)
//	if err := env.Err(); err != nil { // names every missing variable at once
//		logs.Fatal(log, "config", err)
//	}
//	cfg, err := lambdaenv.AWS(ctx)
//	st := dynamo.New(lambdaenv.DynamoDB(cfg), tables)
package lambdaenv
