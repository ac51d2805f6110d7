// Package logstest holds Buffer, a log destination a test hands to slog while goroutines it
// starts (a runner, a stack's handlers) write to it, and then reads back.
//
//	var logs logstest.Buffer
//	log := slog.New(slog.NewJSONHandler(&logs, nil))
//	...
//	n := strings.Count(logs.String(), `"msg":"recovery retry scheduled"`)
package logstest
