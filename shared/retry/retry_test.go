package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"pgregory.net/rapid"
)

// fakeSleeper records the waits instead of sleeping.
type fakeSleeper struct {
	waits []time.Duration
	err   error // returned from every Sleep when set
}

func (f *fakeSleeper) Sleep(_ context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return f.err
}

func testPolicy(seed uint64) (*Policy, *fakeSleeper) {
	s := &fakeSleeper{}
	p := New(Policy{Rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), Sleeper: s, Log: slog.New(slog.DiscardHandler)})
	return p, s
}

func TestClassifyStatus(t *testing.T) {
	tests := map[string]struct {
		status int
		want   Verdict
	}{
		"200 ok":                {200, Success},
		"201 created":           {201, Success},
		"400 bad request":       {400, Permanent},
		"401 unauthorized":      {401, Credentials},
		"402 card decline":      {402, Decline},
		"403 forbidden":         {403, Credentials},
		"404 not found":         {404, Permanent},
		"409 key in flight":     {409, UnknownOutcome},
		"422 unprocessable":     {422, Permanent},
		"429 too many requests": {429, Throttled},
		"500 internal":          {500, Transient},
		"502 bad gateway":       {502, Transient},
		"503 unavailable":       {503, Transient},
		"504 gateway timeout":   {504, Transient},
		"599 other 5xx":         {599, Transient},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClassifyStatus(tc.status); got != tc.want {
				t.Fatalf("ClassifyStatus(%d) = %v, want %v", tc.status, got, tc.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyTransport(t *testing.T) {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "http://x/v1/payment_intents", Err: err} }
	tests := map[string]struct {
		err  error
		want Verdict
	}{
		"nil":                {nil, Success},
		"dial refused":       {post(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), Transient},
		"dns failure":        {post(&net.DNSError{Err: "no such host", Name: "api.stripe.com"}), Transient},
		"read reset":         {post(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), UnknownOutcome},
		"unexpected eof":     {post(io.ErrUnexpectedEOF), UnknownOutcome},
		"eof":                {post(io.EOF), UnknownOutcome},
		"client timeout":     {post(timeoutErr{}), UnknownOutcome},
		"deadline exceeded":  {post(context.DeadlineExceeded), UnknownOutcome},
		"caller cancelled":   {post(context.Canceled), UnknownOutcome},
		"unrecognised error": {errors.New("something odd"), UnknownOutcome},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClassifyTransport(tc.err); got != tc.want {
				t.Fatalf("ClassifyTransport(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		"delta seconds":     {"7", 7 * time.Second, true},
		"zero":              {"0", 0, true},
		"padded":            {" 3 ", 3 * time.Second, true},
		"imf date ahead":    {now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		"rfc850 date ahead": {now.Add(2 * time.Minute).Format(time.RFC850), 2 * time.Minute, true},
		"asctime ahead":     {now.Add(5 * time.Second).Format(time.ANSIC), 5 * time.Second, true},
		"date in the past":  {now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		"huge delta":        {"99999999999999999999999", maxRetryAfter, true},
		"empty":             {"", 0, false},
		"negative":          {"-5", 0, false},
		"fraction":          {"1.5", 0, false},
		"garbage":           {"soon", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.in, now)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, s := range []string{"0", "120", "Sun, 29 Nov 2026 08:01:00 GMT", "Sunday, 29-Nov-26 08:01:00 GMT",
		"Sun Nov 29 08:01:00 2026", "", "-1", "1e9", "18446744073709551616", "Mon, 01 Jan 0001 00:00:00 GMT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v out of [0, %v]", s, d, maxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok=false", s, d)
		}
		if ok && isDigits(s) && d < maxRetryAfter {
			// A delta that parsed must round-trip to the same number of seconds.
			if got := fmt.Sprint(int64(d / time.Second)); trimZeros(s) != got {
				t.Fatalf("ParseRetryAfter(%q) = %v, does not round-trip (%s)", s, d, got)
			}
		}
	})
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

func TestDecide(t *testing.T) {
	throttled := func(d time.Duration) error { return &provider.ThrottledError{Op: "create", RetryAfter: d} }
	tests := map[string]struct {
		err         error
		idempotent  bool
		wantVerdict Verdict
		wantRetry   bool
		wantWait    time.Duration // -1: any full-jitter wait within the ceiling
		wantCost    int
	}{
		"throttled with retry-after waits exactly":        {throttled(3 * time.Second), false, Throttled, true, 3 * time.Second, DefaultRetryCost},
		"throttled without retry-after backs off":         {throttled(0), false, Throttled, true, -1, DefaultRetryCost},
		"throttled beyond the inline limit":               {throttled(time.Minute), true, Throttled, false, 0, DefaultRetryCost},
		"transient backs off":                             {&provider.TransientError{Op: "get", StatusCode: 503}, false, Transient, true, -1, DefaultRetryCost},
		"unknown outcome with a key":                      {&provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k"}, true, UnknownOutcome, true, -1, DefaultTimeoutCost},
		"unknown outcome after a 5xx costs a plain retry": {&provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k", StatusCode: 502}, true, UnknownOutcome, true, -1, DefaultRetryCost},
		"unknown outcome without a key":                   {&provider.UnknownOutcomeError{Op: "create"}, false, UnknownOutcome, false, 0, 0},
		"decline is final":                                {&provider.DeclineError{}, true, Decline, false, 0, 0},
		"permanent":                                       {&provider.PermanentError{StatusCode: 400}, true, Permanent, false, 0, 0},
		"credentials":                                     {&provider.CredentialsError{StatusCode: 401}, true, Credentials, false, 0, 0},
		"foreign error is not repeated":                   {errors.New("boom"), true, Permanent, false, 0, 0},
		"wrapped transient is found":                      {fmt.Errorf("ctx: %w", &provider.TransientError{StatusCode: 500}), true, Transient, true, -1, DefaultRetryCost},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, _ := testPolicy(1)
			d := p.Decide(tc.err, tc.idempotent, 1)
			if d.Verdict != tc.wantVerdict || d.Retry != tc.wantRetry {
				t.Fatalf("Decide = %+v, want verdict %v retry %v", d, tc.wantVerdict, tc.wantRetry)
			}
			if d.Retry && d.Cost != tc.wantCost {
				t.Fatalf("cost = %d, want %d", d.Cost, tc.wantCost)
			}
			switch {
			case tc.wantWait == -1:
				if ceil := BackoffCeiling(p.Base, p.Cap, 1); d.Wait < 0 || d.Wait > ceil {
					t.Fatalf("wait %v outside [0, %v]", d.Wait, ceil)
				}
			case d.Wait != tc.wantWait:
				t.Fatalf("wait = %v, want %v", d.Wait, tc.wantWait)
			}
			if !d.Retry && d.Why == "" {
				t.Fatal("a refused retry must say why")
			}
		})
	}
}

func TestShouldRetryVetoes(t *testing.T) {
	p, _ := testPolicy(1)
	p.ShouldRetry = func(err error) bool { return false }
	if d := p.Decide(&provider.TransientError{StatusCode: 503}, true, 0); d.Retry {
		t.Fatalf("ShouldRetry=false must veto, got %+v", d)
	}
}

// The API's policy leaves an unknown outcome to the background resolver, even with a key that
// makes the repeat safe, and repeats what a caller may wait for.
func TestAPIPolicyLeavesUnknownOutcomesToTheResolver(t *testing.T) {
	tests := map[string]struct {
		err       error
		wantRetry bool
	}{
		"unknown outcome, keyed":        {&provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k"}, false},
		"unknown outcome after a 500":   {&provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k", StatusCode: 500}, false},
		"wrapped unknown outcome":       {fmt.Errorf("create: %w", &provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k"}), false},
		"transient":                     {&provider.TransientError{Op: "get", StatusCode: 503}, true},
		"throttled without retry-after": {&provider.ThrottledError{Op: "create"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := NewAPI(Policy{Rand: rand.New(rand.NewPCG(1, 2)), Sleeper: &fakeSleeper{}, Log: slog.New(slog.DiscardHandler)})
			if d := p.Decide(tc.err, true, 0); d.Retry != tc.wantRetry {
				t.Fatalf("decision %+v, want retry %v", d, tc.wantRetry)
			}
		})
	}
	vetoed := NewAPI(Policy{Rand: rand.New(rand.NewPCG(1, 2)), ShouldRetry: func(error) bool { return false }})
	if d := vetoed.Decide(&provider.TransientError{StatusCode: 503}, true, 0); d.Retry {
		t.Fatalf("the caller's own veto was lost: %+v", d)
	}
}

func TestDo(t *testing.T) {
	transient := &provider.TransientError{Op: "get", StatusCode: 503}
	unknown := &provider.UnknownOutcomeError{Op: "create", IdempotencyKey: "k"}
	tests := map[string]struct {
		results    []error // per attempt; past the end: success
		idempotent bool
		budget     int
		wantCalls  int
		wantErr    error
		wantTokens int
		wantWaits  []time.Duration // nil: do not check values, only count
		wantNWaits int
	}{
		"success first time refunds one": {
			results: nil, budget: 100, wantCalls: 1, wantTokens: 100, wantNWaits: 0,
		},
		"transient then success refunds the retry": {
			results: []error{transient}, idempotent: true, budget: 100, wantCalls: 2, wantTokens: 100, wantNWaits: 1,
		},
		"transient three times exhausts attempts": {
			results: []error{transient, transient, transient}, idempotent: true, budget: 100,
			wantCalls: 3, wantErr: transient, wantTokens: 100 - 2*DefaultRetryCost, wantNWaits: 2,
		},
		"throttled waits exactly retry-after": {
			results: []error{&provider.ThrottledError{RetryAfter: 2 * time.Second}, &provider.ThrottledError{RetryAfter: 7 * time.Second}},
			budget:  100, wantCalls: 3, wantTokens: 100, wantWaits: []time.Duration{2 * time.Second, 7 * time.Second}, wantNWaits: 2,
		},
		"unknown outcome without key is not repeated": {
			results: []error{unknown}, idempotent: false, budget: 100, wantCalls: 1, wantErr: unknown, wantTokens: 100,
		},
		"unknown outcome with key costs a timeout": {
			results: []error{unknown, unknown, unknown}, idempotent: true, budget: 100,
			wantCalls: 3, wantErr: unknown, wantTokens: 100 - 2*DefaultTimeoutCost, wantNWaits: 2,
		},
		"empty budget fails fast": {
			results: []error{transient, transient}, idempotent: true, budget: DefaultRetryCost - 1,
			wantCalls: 1, wantErr: transient, wantTokens: DefaultRetryCost - 1,
		},
		"budget for one retry only": {
			results: []error{unknown, unknown, unknown}, idempotent: true, budget: DefaultTimeoutCost + 3,
			wantCalls: 2, wantErr: unknown, wantTokens: 3, wantNWaits: 1,
		},
		"decline is returned at once": {
			results: []error{&provider.DeclineError{}}, idempotent: true, budget: 100, wantCalls: 1,
			wantErr: &provider.DeclineError{}, wantTokens: 100,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, s := testPolicy(7)
			p.Budget = NewBudget(tc.budget)
			if tc.budget > 0 && !p.Budget.Take(0) {
				t.Fatal("Take(0) must succeed")
			}
			calls := 0
			err := p.Do(context.Background(), "op", tc.idempotent, func(context.Context) error {
				calls++
				if calls <= len(tc.results) {
					return tc.results[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tc.wantErr != nil && Classify(err) != Classify(tc.wantErr) {
				t.Fatalf("err = %v, want class of %v", err, tc.wantErr)
			}
			if got := p.Budget.Tokens(); got != min(tc.wantTokens, tc.budget) {
				t.Fatalf("tokens = %d, want %d", got, tc.wantTokens)
			}
			if len(s.waits) != tc.wantNWaits {
				t.Fatalf("waits = %v, want %d of them", s.waits, tc.wantNWaits)
			}
			for i, w := range tc.wantWaits {
				if s.waits[i] != w {
					t.Fatalf("wait %d = %v, want %v", i, s.waits[i], w)
				}
			}
		})
	}
}

func TestDoStopsWhenContextEnds(t *testing.T) {
	p, s := testPolicy(3)
	s.err = context.Canceled
	transient := &provider.TransientError{StatusCode: 502}
	calls := 0
	err := p.Do(context.Background(), "get", true, func(context.Context) error { calls++; return transient })
	if calls != 1 {
		t.Fatalf("calls = %d, want 1: a cancelled wait ends the loop", calls)
	}
	var te *provider.TransientError
	if !errors.As(err, &te) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the last error joined with context.Canceled", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p2, s2 := testPolicy(3)
	calls = 0
	err = p2.Do(ctx, "get", true, func(context.Context) error { calls++; return transient })
	if calls != 1 || len(s2.waits) != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: calls=%d waits=%v err=%v", calls, s2.waits, err)
	}
}

func TestDoDoesNotSleepIntoTheDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	tests := map[string]struct {
		left      time.Duration // before the deadline when the first call starts
		call      time.Duration // how long each call takes
		wantCalls int
	}{
		"deadline before the wait ends":               {left: 1 * time.Second, wantCalls: 1},
		"deadline after the wait ends":                {left: 3 * time.Second, wantCalls: 2},
		"the wait fits, the wait and a call do not":   {left: 5 * time.Second, call: 1500 * time.Millisecond, wantCalls: 1},
		"the wait and a call as long as the last fit": {left: 6 * time.Second, call: 1500 * time.Millisecond, wantCalls: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, s := testPolicy(1)
			now := deadline.Add(-tc.left)
			p.Now = func() time.Time { return now }
			calls := 0
			err := p.Do(ctx, "create", true, func(context.Context) error {
				calls++
				now = now.Add(tc.call)
				if calls == 1 {
					return &provider.ThrottledError{RetryAfter: 2 * time.Second}
				}
				return nil
			})
			if calls != tc.wantCalls || len(s.waits) != tc.wantCalls-1 {
				t.Fatalf("calls = %d, waits = %v, err = %v; want %d calls", calls, s.waits, err, tc.wantCalls)
			}
		})
	}
}

func TestTimerSleeperRespectsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := (TimerSleeper{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled ctx = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return promptly on a cancelled context")
	}
}

func TestBackoffJitterProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		base := time.Duration(rapid.Int64Range(1, int64(10*time.Second)).Draw(t, "base"))
		cap := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "cap"))
		n := rapid.IntRange(0, 200).Draw(t, "retry")
		p := New(Policy{Rand: rand.New(rand.NewPCG(seed, 1)), Base: base, Cap: cap})
		ceil := BackoffCeiling(base, cap, n)
		want := cap
		if n < 62 && base <= cap>>n {
			want = min(cap, base<<n)
		}
		if ceil != want {
			t.Fatalf("ceiling(%v, %v, %d) = %v, want %v", base, cap, n, ceil, want)
		}
		if got := p.Backoff(n); got < 0 || got > ceil {
			t.Fatalf("Backoff(%d) = %v outside [0, %v]", n, got, ceil)
		}
	})
}

// The jitter must actually spread: a fixed-interval retry is forbidden by the design.
func TestBackoffSpreads(t *testing.T) {
	p, _ := testPolicy(42)
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[p.Backoff(3)] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 draws gave %d distinct waits; full jitter should spread them", len(seen))
	}
}

func TestBudgetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 600).Draw(t, "capacity")
		b := NewBudget(capacity)
		model := capacity
		ops := rapid.SliceOf(rapid.IntRange(-2, 12)).Draw(t, "ops")
		for _, op := range ops {
			switch {
			case op <= 0: // a success refunding 1 or its retries' cost
				n := -op + 1
				b.Refund(n)
				model = min(capacity, model+n)
			default:
				ok := b.Take(op)
				if ok != (model >= op) {
					t.Fatalf("Take(%d) = %v with %d tokens", op, ok, model)
				}
				if ok {
					model -= op
				}
			}
			if got := b.Tokens(); got != model || got < 0 || got > capacity {
				t.Fatalf("tokens = %d, model %d, capacity %d", got, model, capacity)
			}
		}
		// Drained, no retry may happen.
		for b.Take(1) {
		}
		p, s := testPolicy(1)
		p.Budget = b
		calls := 0
		_ = p.Do(context.Background(), "op", true, func(context.Context) error {
			calls++
			return &provider.TransientError{StatusCode: 503}
		})
		if calls != 1 || len(s.waits) != 0 || b.Tokens() != 0 {
			t.Fatalf("empty budget: calls=%d waits=%d tokens=%d", calls, len(s.waits), b.Tokens())
		}
	})
}
