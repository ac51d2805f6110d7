package opsapi

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/problem"
)

// Defaults of a FailureLimiter's zero fields: 10 failures a minute per source, 4,096 sources.
const (
	DefaultMaxFailures   = 10
	DefaultFailureWindow = time.Minute
	DefaultSources       = 4096
)

// FailureLimiter slows down guessing of the operator token: after Max failed logins or bearer
// tokens from one source IP within Window, every credential check from that IP answers 429
// with Retry-After until the window that began with its first failure ends. A right token is
// refused too while the source is blocked, or a guesser would learn from the difference;
// other sources are not affected. The table of sources is capped at Sources entries (expired
// ones go first, then the oldest), so a flood of addresses cannot grow it without bound.
// Build it with NewFailureLimiter.
type FailureLimiter struct {
	Max     int           // failures per source within Window before it is blocked
	Window  time.Duration // counted from a source's first failure
	Sources int           // the most sources tracked at once
	Clock   clock.Clock   // default the wall clock
	Log     *slog.Logger  // a line per refused request, when set

	t *failureTable
}

type failureTable struct {
	mu   sync.Mutex
	seen map[string]*failures
}

type failures struct {
	start time.Time // the first failure of the window
	n     int
}

// NewFailureLimiter returns l ready to count, its zero fields defaulted.
func NewFailureLimiter(l FailureLimiter) *FailureLimiter {
	if l.Max <= 0 {
		l.Max = DefaultMaxFailures
	}
	if l.Window <= 0 {
		l.Window = DefaultFailureWindow
	}
	if l.Sources <= 0 {
		l.Sources = DefaultSources
	}
	if l.Clock == nil {
		l.Clock = clock.Real()
	}
	l.t = &failureTable{seen: map[string]*failures{}}
	return &l
}

// Blocked reports whether src may not try a credential now, and for how long.
func (l *FailureLimiter) Blocked(src string) (time.Duration, bool) {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	now := l.Clock.Now()
	f, ok := l.t.seen[src]
	if !ok {
		return 0, false
	}
	end := f.start.Add(l.Window)
	if !now.Before(end) {
		delete(l.t.seen, src)
		return 0, false
	}
	if f.n < l.Max {
		return 0, false
	}
	return end.Sub(now), true
}

// Fail counts a failed credential from src.
func (l *FailureLimiter) Fail(src string) {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	now := l.Clock.Now()
	if f, ok := l.t.seen[src]; ok && now.Before(f.start.Add(l.Window)) {
		f.n++
		return
	}
	if _, ok := l.t.seen[src]; !ok && len(l.t.seen) >= l.Sources {
		l.evict(now)
	}
	l.t.seen[src] = &failures{start: now, n: 1}
}

// Len is the number of sources tracked.
func (l *FailureLimiter) Len() int {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	return len(l.t.seen)
}

// evict makes room for one source: every expired entry goes, else the oldest window. A scan
// of a few thousand entries happens only when the table is full.
func (l *FailureLimiter) evict(now time.Time) {
	oldest, at := "", time.Time{}
	for src, f := range l.t.seen {
		if !now.Before(f.start.Add(l.Window)) {
			delete(l.t.seen, src)
			continue
		}
		if oldest == "" || f.start.Before(at) {
			oldest, at = src, f.start
		}
	}
	if len(l.t.seen) >= l.Sources && oldest != "" {
		delete(l.t.seen, oldest)
	}
}

// sourceIP is the request's peer address without its port. Forwarding headers are not read:
// any client can set them.
func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Refuse answers 429 problem+json with Retry-After when r's source is blocked, and reports
// whether it did. A nil limiter refuses nothing.
func (l *FailureLimiter) Refuse(w http.ResponseWriter, r *http.Request) bool {
	if l == nil {
		return false
	}
	src := sourceIP(r)
	wait, blocked := l.Blocked(src)
	if !blocked {
		return false
	}
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	if l.Log != nil {
		l.Log.WarnContext(r.Context(), "operator credentials throttled", "source", src, "retry_after_s", secs)
	}
	p := problem.New(problem.TooManyAttempts, "Too many failed sign-ins from this address; try again after the time in Retry-After.")
	p.RetryAfter = secs
	problem.Write(w, p)
	return true
}

// Failed counts a failed credential presented by r. A nil limiter counts nothing.
func (l *FailureLimiter) Failed(r *http.Request) {
	if l != nil {
		l.Fail(sourceIP(r))
	}
}
