package recovery

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/lambda/messages"
)

// LambdaHandler adapts Steps.Handle for lambda.Start. The Go Lambda runtime reports an
// error's Go type name ("TransientError") unless the handler returns a
// messages.InvokeResponse_Error, so this reports the error's ErrorName ("Recovery.Transient")
// as the errorType that Step Functions' Retry and Catch match.
func LambdaHandler(h func(context.Context, json.RawMessage) (json.RawMessage, error)) func(context.Context, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		out, err := h(ctx, in)
		var named interface{ ErrorName() string }
		if err != nil && errors.As(err, &named) {
			return nil, messages.InvokeResponse_Error{Type: named.ErrorName(), Message: err.Error()}
		}
		return out, err
	}
}
