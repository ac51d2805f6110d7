package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Getter reads one raw secret value from a store; ssmparam.Client reads SSM Parameter Store.
// Errors should wrap ErrNotFound or ErrUnavailable; any other error counts as unavailable.
type Getter interface {
	Get(ctx context.Context, name string) (string, error)
}

// Defaults for Cached.
const (
	DefaultRefresh    = 5 * time.Minute
	DefaultRetryAfter = 30 * time.Second
)

// Cached serves secrets from a Getter. Each name is read on first use (never at start-up) and
// cached; after Refresh it is read again on the next use. If a refresh fails, the last good value
// keeps being served (and the failure logged, without the value), and the next read is tried
// after RetryAfter, so a throttled store is not hammered. Build it as a literal:
//
//	src := &secrets.Cached{Getter: ssmparam.New(cfg), Log: log}
type Cached struct {
	// Getter is the store the values are read from (required).
	Getter Getter

	// Refresh is how long a value is served before it is read again (default 5 min).
	Refresh time.Duration
	// RetryAfter is how long a failed refresh waits before the next try (default 30 s).
	RetryAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log gets refresh failures (default slog.Default()).
	Log *slog.Logger

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	values []string
	next   time.Time
}

func (s *Cached) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Cached) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Cached) refresh() time.Duration {
	if s.Refresh <= 0 {
		return DefaultRefresh
	}
	return s.Refresh
}

func (s *Cached) retryAfter() time.Duration {
	if s.RetryAfter <= 0 {
		return DefaultRetryAfter
	}
	return s.RetryAfter
}

// Secrets returns the active secrets under name, split with Split. Reads are serialised: a
// Lambda container serves one request at a time, and one read per Refresh is all the store sees.
func (s *Cached) Secrets(ctx context.Context, name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cache == nil {
		s.cache = map[string]entry{}
	}
	e, cached := s.cache[name]
	if cached && now.Before(e.next) {
		return e.values, nil
	}
	values, err := s.fetch(ctx, name)
	if err == nil {
		s.cache[name] = entry{values: values, next: now.Add(s.refresh())}
		return values, nil
	}
	if !cached {
		return nil, err
	}
	s.log().WarnContext(ctx, "secret refresh failed; serving the last good value",
		"secret", name, "err", err, "retry_in", s.retryAfter().String())
	s.cache[name] = entry{values: e.values, next: now.Add(s.retryAfter())}
	return e.values, nil
}

func (s *Cached) fetch(ctx context.Context, name string) ([]string, error) {
	v, err := s.Getter.Get(ctx, name)
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrUnavailable), errors.Is(err, ErrEmpty):
		return nil, err
	default:
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	values := Split(v)
	if len(values) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return values, nil
}
