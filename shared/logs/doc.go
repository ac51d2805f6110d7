// Package logs is a deployed function's logger: JSON on stderr (Lambda's JSON log format keeps
// it as is), each line carrying function_name and, during an invocation, function_request_id,
// cold_start and xray_trace_id, named as Powertools' logger names them so the same Logs
// Insights queries work across languages. Fatal is the one way a main gives up during INIT.
//
//	func main() {
//		log := logs.Logger()
//		cfg, err := lambdaenv.AWS(context.Background())
//		if err != nil {
//			logs.Fatal(log, "aws config", err)
//		}
//		...
//		lambda.Start(logs.Handler(h)) // each invocation's lines carry its request id
//	}
//
// A function that logs outside input wraps the handler with redact.LogHandler:
//
//	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
//
// That wrapper is not here: the redaction engine links go-json-experiment, which the functions
// that need no redaction (deadletter-sink, webhook-worker, outbox-relay) must not link (infra/rie's
// TestLambdaBinariesLinkOnlyTheModulesTheirJobNeeds).
package logs
