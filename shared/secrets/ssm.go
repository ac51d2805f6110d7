package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SSMClient is the one call SSM needs; *ssm.Client satisfies it.
type SSMClient interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var _ SSMClient = (*ssm.Client)(nil)

// Defaults for SSM.
const (
	DefaultRefresh    = 5 * time.Minute
	DefaultRetryAfter = 30 * time.Second
)

// SSM serves secrets from SSM Parameter Store (SecureString, read WithDecryption). Each name is
// read on first use and cached; after Refresh it is read again on the next use. If a refresh
// fails, the last good value keeps being served (and the failure logged, without the value), and
// the next read is tried after RetryAfter, so a throttled SSM is not hammered.
type SSM struct {
	client SSMClient

	// Refresh is how long a value is served before it is read again (default 5 min).
	Refresh time.Duration
	// RetryAfter is how long a failed refresh waits before the next try (default 30 s).
	RetryAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger gets refresh failures (default slog.Default()).
	Logger *slog.Logger

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	values []string
	next   time.Time
}

// NewSSM returns a source over client with the defaults.
func NewSSM(client SSMClient) *SSM {
	return &SSM{client: client, Refresh: DefaultRefresh, RetryAfter: DefaultRetryAfter,
		Now: time.Now, Logger: slog.Default(), cache: map[string]entry{}}
}

// Secrets returns the active secrets in parameter name, split with Split.
// Reads are serialised: a Lambda container serves one request at a time, and one read per
// Refresh is all SSM sees.
func (s *SSM) Secrets(ctx context.Context, name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	e, cached := s.cache[name]
	if cached && now.Before(e.next) {
		return e.values, nil
	}
	values, err := s.fetch(ctx, name)
	if err == nil {
		s.cache[name] = entry{values: values, next: now.Add(s.Refresh)}
		return values, nil
	}
	if !cached {
		return nil, err
	}
	s.Logger.WarnContext(ctx, "secret refresh failed; serving the last good value",
		"secret", name, "err", err, "retry_in", s.RetryAfter.String())
	s.cache[name] = entry{values: e.values, next: now.Add(s.RetryAfter)}
	return e.values, nil
}

func (s *SSM) fetch(ctx context.Context, name string) ([]string, error) {
	out, err := s.client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		var nf *types.ParameterNotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		// SDK errors carry the operation, status and request id, never a parameter value.
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	v := Split(*out.Parameter.Value)
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return v, nil
}
