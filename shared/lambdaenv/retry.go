package lambdaenv

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// The retry policy of every AWS call a function makes (DynamoDB, SQS, Step Functions,
// EventBridge, SSM). AWS sets it on the configuration, so it is decided here and nowhere else.
//
// It is the SDK's standard retryer: throttling errors (ThrottlingException,
// ProvisionedThroughputExceededException, RequestThrottled, ...) and 5xx are retried with full
// jitter (the wait before retry n is uniform in [0, min(MaxBackoff, base*2^(n-1))], base 1 s for
// a throttle, 50 ms otherwise), and a retry takes tokens from the client's retry quota (500
// tokens, 5 a throttled retry, 14 any other), so a service that keeps throttling gets no more
// than its first attempts: the call fails fast with "retry quota exceeded" instead of looping.
const (
	// RetryMaxAttempts counts the first call: one more than the SDK's default 3, the count
	// DynamoDB's own clients use, since a throttle usually clears within a second or two.
	RetryMaxAttempts = 4
	// RetryMaxBackoff caps one wait. Three waits of at most 1, 2 and 2 s fit the shortest
	// function timeout (10 s) with room for the calls.
	RetryMaxBackoff = 2 * time.Second
	// RetryReserve is the time a retry needs before the context's deadline: the longest wait
	// and a call. With less left the call fails now and its caller hands the work back (a
	// batch item failure, an outbox message left due, a 503) while the function can still
	// answer, instead of Lambda cutting it off mid-call.
	RetryReserve = RetryMaxBackoff + time.Second
)

// ErrDeadlineNear is joined to a call's error when a retry was not started because the
// context's deadline was within the reserve.
var ErrDeadlineNear = errors.New("lambdaenv: retry not started: the deadline is too near")

// Retry configures NewRetryer. Zero fields take the Retry* constants, the SDK's backoff and
// time.Now.
type Retry struct {
	MaxAttempts int
	MaxBackoff  time.Duration
	Reserve     time.Duration
	// Backoff computes each wait; nil is the SDK's exponential full jitter. Tests wrap the
	// SDK's to record the waits.
	Backoff retry.BackoffDelayer
	Now     func() time.Time
}

// NewRetryer returns the standard retryer configured by r, which also refuses a retry when the
// context's deadline is nearer than r.Reserve.
func NewRetryer(r Retry) aws.RetryerV2 {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = RetryMaxAttempts
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = RetryMaxBackoff
	}
	if r.Reserve <= 0 {
		r.Reserve = RetryReserve
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	std := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = r.MaxAttempts
		o.MaxBackoff = r.MaxBackoff
		if r.Backoff != nil {
			o.Backoff = r.Backoff
		}
	})
	return &deadlineRetryer{Standard: std, reserve: r.Reserve, now: r.Now}
}

// deadlineRetryer is the standard retryer that asks for the deadline before each retry. The
// SDK's middleware calls GetRetryToken after deciding a retry is allowed and before the wait; an
// error here ends the call with the attempt's own error joined to it.
type deadlineRetryer struct {
	*retry.Standard
	reserve time.Duration
	now     func() time.Time
}

func (r *deadlineRetryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	if dl, ok := ctx.Deadline(); ok && dl.Sub(r.now()) < r.reserve {
		return nil, ErrDeadlineNear
	}
	return r.Standard.GetRetryToken(ctx, opErr)
}

// Attempts runs call as the SDK's retry middleware runs an operation, for a call that is not an
// SDK client's (ssmparam's GetParameter, the local stack's stand-ins): after a failed attempt it
// asks r whether the error is retryable, whether attempts are left, for a retry token (the
// quota, and the deadline check of NewRetryer's retryer) and for the wait, then waits or ends on
// ctx. The error of the last attempt is returned, wrapped in the SDK's *retry.MaxAttemptsError
// when the attempts ran out.
func Attempts(ctx context.Context, r aws.Retryer, call func(context.Context) error) (err error) {
	for attempt := 1; ; attempt++ {
		if err = call(ctx); err == nil || !r.IsErrorRetryable(err) {
			return err
		}
		if attempt >= r.MaxAttempts() {
			return &retry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		release, terr := r.GetRetryToken(ctx, err)
		if terr != nil {
			return errors.Join(err, terr)
		}
		// The token goes back if a retry succeeds, as the SDK's middleware does.
		defer func() { release(err) }()
		wait, derr := r.RetryDelay(attempt, err)
		if derr != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
