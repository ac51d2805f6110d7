package lambdaenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/shared/lambdaenv"
)

// TestAttempts: a call that is not an SDK client's is retried as one: throttles until they
// clear, never an error the retryer calls permanent, at most RetryMaxAttempts times, and not
// at all with the deadline within the reserve.
func TestAttempts(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	noWait := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	tests := map[string]struct {
		fails     int // attempts that fail before one succeeds (-1: all)
		err       error
		deadline  time.Duration // 0: none
		wantCalls int
		wantErr   error
	}{
		"clears":          {fails: 2, err: throttled, wantCalls: 3},
		"persists":        {fails: -1, err: throttled, wantCalls: lambdaenv.RetryMaxAttempts, wantErr: throttled},
		"permanent":       {fails: -1, err: &smithy.GenericAPIError{Code: "ValidationException"}, wantCalls: 1},
		"deadline near":   {fails: -1, err: throttled, deadline: time.Second, wantCalls: 1, wantErr: lambdaenv.ErrDeadlineNear},
		"deadline far":    {fails: 1, err: throttled, deadline: time.Minute, wantCalls: 2},
		"first try works": {fails: 0, wantCalls: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			calls := 0
			err := lambdaenv.Attempts(ctx, lambdaenv.NewRetryer(lambdaenv.Retry{Backoff: noWait}), func(context.Context) error {
				calls++
				if tc.fails < 0 || calls <= tc.fails {
					return tc.err
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d (err %v)", calls, tc.wantCalls, err)
			}
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			case tc.fails >= 0 && tc.fails < tc.wantCalls && err != nil:
				t.Fatalf("err %v after the throttle cleared", err)
			}
			var ma *retry.MaxAttemptsError
			if name == "persists" && !errors.As(err, &ma) {
				t.Fatalf("err %v, want the SDK's MaxAttemptsError", err)
			}
		})
	}
}
