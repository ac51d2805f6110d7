package retry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Policy defaults. Three attempts and a 20 s cap follow the AWS SDK's standard mode; the base is
// shorter because a payment request has a caller waiting.
const (
	DefaultMaxAttempts   = 3
	DefaultBase          = 100 * time.Millisecond
	DefaultCap           = 20 * time.Second
	DefaultMaxRetryAfter = 10 * time.Second
)

// Sleeper waits for d or until ctx is done, returning ctx.Err() in that case. Tests inject a
// fake that records the waits instead of sleeping.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

// TimerSleeper sleeps on a real timer.
type TimerSleeper struct{}

// Sleep waits for d or ctx, whichever ends first.
func (TimerSleeper) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Policy is the outbound retry policy: which results are repeated, how long to wait, and how
// much repeating a provider can absorb. Build it with New, which fills the defaults and the
// budget once:
//
//	p := retry.New(retry.Policy{Rand: rand.New(rand.NewPCG(seed, seed)), Log: log})
type Policy struct {
	// MaxAttempts counts the first call: 3 means at most two retries.
	MaxAttempts int
	// Base and Cap bound full-jitter backoff: wait = rand[0, min(Cap, Base*2^retry)].
	Base, Cap time.Duration
	// MaxRetryAfter is the longest Retry-After honoured inline. A longer one fails fast with the
	// *provider.ThrottledError so that the caller (recovery, the background resolver) schedules
	// the repeat instead of holding a request open.
	MaxRetryAfter time.Duration
	// RetryCost and TimeoutCost are the budget tokens a retry takes; TimeoutCost applies to an
	// unknown outcome without a response (a timeout, a reset).
	RetryCost, TimeoutCost int
	// ShouldRetry, when set, can veto a retry the classification allows (a watermill-style
	// predicate); it cannot force one.
	ShouldRetry func(err error) bool

	Budget  *Budget
	Sleeper Sleeper
	Log     *slog.Logger
	// Now is the clock used against ctx deadlines. Default time.Now.
	Now func() time.Time
	// Rand is the source of jitter (required).
	Rand *rand.Rand

	mu *sync.Mutex // guards Rand: *rand.Rand is not safe for concurrent use
}

// New returns p with its zero fields set to the defaults (DefaultMaxAttempts and the other
// Default constants, a fresh budget of DefaultBudgetCapacity, a real sleeper, slog.Default(),
// time.Now). Fields changed after New keep their values.
func New(p Policy) *Policy {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.MaxAttempts, DefaultMaxAttempts)
	defD(&p.Base, DefaultBase)
	defD(&p.Cap, DefaultCap)
	defD(&p.MaxRetryAfter, DefaultMaxRetryAfter)
	def(&p.RetryCost, DefaultRetryCost)
	def(&p.TimeoutCost, DefaultTimeoutCost)
	if p.Budget == nil {
		p.Budget = NewBudget(DefaultBudgetCapacity)
	}
	if p.Sleeper == nil {
		p.Sleeper = TimerSleeper{}
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	p.mu = new(sync.Mutex)
	return &p
}

// NewAPI is New for the payments API's provider calls, where a caller waits on the answer: an
// unknown outcome (*provider.UnknownOutcomeError) is never repeated inline, because the timeout
// already used the caller's patience. The payment stays pending and is resolved in the
// background under the same provider key. A ShouldRetry in p still vetoes too. The payments-api
// function and the local stack both build their policy here.
func NewAPI(p Policy) *Policy {
	veto := p.ShouldRetry
	p.ShouldRetry = func(err error) bool {
		var unknown *provider.UnknownOutcomeError
		return !errors.As(err, &unknown) && (veto == nil || veto(err))
	}
	return New(p)
}

// Backoff returns the full-jitter wait before retry number retry (0 for the first retry):
// a uniform draw from [0, min(Cap, Base*2^retry)].
func (p *Policy) Backoff(retry int) time.Duration {
	ceil := BackoffCeiling(p.Base, p.Cap, retry)
	if ceil <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.Rand.Int64N(int64(ceil) + 1))
}

// BackoffCeiling is min(cap, base*2^retry) without overflow.
func BackoffCeiling(base, cap time.Duration, retry int) time.Duration {
	if base <= 0 || cap <= 0 {
		return 0
	}
	if retry < 0 {
		retry = 0
	}
	// base<<retry overflows once retry passes the leading zeros of base; cap wins before that.
	if retry >= 62 || base > cap>>retry {
		return cap
	}
	return min(cap, base<<retry)
}

// Decision is what the policy would do after a failed attempt.
type Decision struct {
	Verdict Verdict
	Retry   bool
	Wait    time.Duration
	Cost    int    // budget tokens the retry takes
	Why     string // why not, when Retry is false
}

// Decide takes the verdict on err (Classify) and decides whether retry number retry (0-based) may follow.
// idempotent says the repeat is safe for an unknown outcome: a read, or a write carrying a
// provider idempotency key.
func (p *Policy) Decide(err error, idempotent bool, retry int) Decision {
	c := Classify(err)
	d := Decision{Verdict: c}
	switch c {
	case Throttled:
		d.Cost = p.RetryCost
		if ra := retryAfter(err); ra > 0 {
			if ra > p.MaxRetryAfter {
				d.Why = "retry-after beyond the inline limit"
				return d
			}
			d.Retry, d.Wait = true, ra
		} else {
			d.Retry, d.Wait = true, p.Backoff(retry)
		}
	case Transient:
		d.Retry, d.Wait, d.Cost = true, p.Backoff(retry), p.RetryCost
	case UnknownOutcome:
		if !idempotent {
			d.Why = "unknown outcome of a request without an idempotency key"
			return d
		}
		d.Retry, d.Wait, d.Cost = true, p.Backoff(retry), p.TimeoutCost
		var u *provider.UnknownOutcomeError
		if errors.As(err, &u) && u.StatusCode != 0 {
			// An answer came (5xx on a write, 409): priced like any retry, as the AWS SDK
			// prices only timeouts higher.
			d.Cost = p.RetryCost
		}
	default:
		d.Why = "not retryable: " + c.String()
		return d
	}
	if p.ShouldRetry != nil && !p.ShouldRetry(err) {
		d.Retry, d.Wait, d.Why = false, 0, "vetoed by ShouldRetry"
	}
	return d
}

// Do calls op until it succeeds, fails in a way that is not repeated, runs out of attempts, runs
// out of budget, or ctx ends. It returns op's last error unchanged, so callers branch on the
// provider's typed errors; when ctx ends during a wait, ctx's error is joined to it.
func (p *Policy) Do(ctx context.Context, op string, idempotent bool, fn func(context.Context) error) error {
	taken := 0
	var longest time.Duration // the longest call so far: what the next one may take
	for attempt := 1; ; attempt++ {
		began := p.Now()
		err := fn(ctx)
		longest = max(longest, p.Now().Sub(began))
		if err == nil {
			if taken > 0 {
				p.Budget.Refund(taken)
			} else {
				p.Budget.Refund(DefaultSuccessRefund)
			}
			return nil
		}
		d := p.Decide(err, idempotent, attempt-1)
		if !d.Retry {
			return err
		}
		if attempt >= p.MaxAttempts {
			p.Log.LogAttrs(ctx, slog.LevelWarn, "retry exhausted",
				slog.String("op", op), slog.Int("attempts", attempt), slog.String("class", d.Verdict.String()))
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		if dl, ok := ctx.Deadline(); ok && dl.Sub(p.Now()) <= d.Wait+longest {
			// The wait and a call as long as the longest so far would not end before the
			// deadline (a Lambda's, an API request's): the caller could not use the answer, and a
			// call cut off by the deadline is one more unknown outcome. Fail now instead.
			p.Log.LogAttrs(ctx, slog.LevelInfo, "retry skipped: deadline before the wait and the call end",
				slog.String("op", op), slog.Int("attempt", attempt), slog.String("class", d.Verdict.String()),
				slog.Duration("wait", d.Wait), slog.Duration("call", longest))
			return err
		}
		if !p.Budget.Take(d.Cost) {
			p.Log.LogAttrs(ctx, slog.LevelWarn, "retry budget exhausted",
				slog.String("op", op), slog.Int("attempt", attempt), slog.String("class", d.Verdict.String()))
			return err
		}
		taken += d.Cost
		p.Log.LogAttrs(ctx, slog.LevelInfo, "retry scheduled",
			slog.String("op", op), slog.Int("attempt", attempt), slog.String("class", d.Verdict.String()),
			slog.Duration("wait", d.Wait), slog.Int("budget", p.Budget.Tokens()))
		if serr := p.Sleeper.Sleep(ctx, d.Wait); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

func retryAfter(err error) time.Duration {
	var t *provider.ThrottledError
	if errors.As(err, &t) {
		return t.RetryAfter
	}
	return 0
}
