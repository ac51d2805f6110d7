package stripeprovider

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/retry"
)

type fakeSleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleeper) Sleep(_ context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	return nil
}

// scripted answers the n-th request with handlers[n], and the last handler after that.
type scripted struct {
	mu       sync.Mutex
	n        int
	handlers []http.HandlerFunc
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.handlers[min(s.n, len(s.handlers)-1)]
	s.n++
	s.mu.Unlock()
	h(w, r)
}

func retrying(t *testing.T, base string, rec *recorder, budget int) (*retry.Provider, *fakeSleeper) {
	t.Helper()
	s := &fakeSleeper{}
	pol := retry.New(retry.Policy{Rand: rand.New(rand.NewPCG(1, 2)), Sleeper: s, Log: slog.New(slog.DiscardHandler),
		Budget: retry.NewBudget(budget)})
	return &retry.Provider{Next: newTestClient(t, base, rec, 0), Policy: pol}, s
}

// The adapter and the policy together: every repeat of a write carries the same key and body.
func TestRetryingAdapter(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, succeededBody) }
	fail500 := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 500, `{"error": {"type": "api_error"}}`) }
	throttle := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		writeJSON(w, 429, `{"error": {"type": "invalid_request_error", "code": "rate_limit"}}`)
	}
	decline := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 402, declineBody) }
	tests := map[string]struct {
		script    []http.HandlerFunc
		budget    int
		wantCalls int
		wantWaits []time.Duration // -1: any wait
		wantErr   func(error) bool
	}{
		"500 then success": {
			script: []http.HandlerFunc{fail500, ok}, budget: 500, wantCalls: 2, wantWaits: []time.Duration{-1},
		},
		"429 waits exactly Retry-After": {
			script: []http.HandlerFunc{throttle, ok}, budget: 500, wantCalls: 2, wantWaits: []time.Duration{2 * time.Second},
		},
		"reset three times stays unknown": {
			script: []http.HandlerFunc{resetConnection}, budget: 500, wantCalls: 3, wantWaits: []time.Duration{-1, -1},
			wantErr: func(err error) bool { var u *provider.UnknownOutcomeError; return errors.As(err, &u) },
		},
		"decline is never repeated": {
			script: []http.HandlerFunc{decline}, budget: 500, wantCalls: 1,
			wantErr: func(err error) bool { var d *provider.DeclineError; return errors.As(err, &d) },
		},
		"empty budget fails fast": {
			script: []http.HandlerFunc{fail500, ok}, budget: 1, wantCalls: 1,
			wantErr: func(err error) bool { var u *provider.UnknownOutcomeError; return errors.As(err, &u) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(&scripted{handlers: tc.script})
			defer srv.Close()
			rec := &recorder{}
			p, sleeper := retrying(t, srv.URL, rec, tc.budget)
			key := provider.IdempotencyKey("local", name)
			_, err := p.Create(context.Background(), provider.CreateRequest{Amount: 1999, Currency: "usd",
				PaymentMethod: "pm_card_visa", IdempotencyKey: key})
			if tc.wantErr == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr != nil && !tc.wantErr(err) {
				t.Fatalf("err = %v of the wrong kind", err)
			}
			calls := rec.all()
			if len(calls) != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", len(calls), tc.wantCalls)
			}
			for _, c := range calls {
				if c.IdempotencyKey != key || string(c.RequestBody) != string(calls[0].RequestBody) {
					t.Fatalf("a repeat changed the key or body: %q %q", c.IdempotencyKey, c.RequestBody)
				}
			}
			if len(sleeper.waits) != len(tc.wantWaits) {
				t.Fatalf("waits = %v, want %d", sleeper.waits, len(tc.wantWaits))
			}
			for i, w := range tc.wantWaits {
				if w >= 0 && sleeper.waits[i] != w {
					t.Fatalf("wait %d = %v, want %v", i, sleeper.waits[i], w)
				}
			}
		})
	}
}

// A listing that fails mid-way resumes after the last payment it yielded: nothing twice, nothing lost.
func TestRetryingListResumes(t *testing.T) {
	list := &fakeStripeList{n: 250}
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("starting_after") == "pi_151" {
			failed := false
			once.Do(func() { failed = true })
			if failed {
				writeJSON(w, 503, `{"error": {"type": "api_error"}}`)
				return
			}
		}
		list.ServeHTTP(w, r)
	}))
	defer srv.Close()
	p, sleeper := retrying(t, srv.URL, nil, 500)
	seen := map[string]bool{}
	for pay, err := range p.List(context.Background(), provider.ListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[pay.ID] {
			t.Fatalf("%s yielded twice", pay.ID)
		}
		seen[pay.ID] = true
	}
	if len(seen) != 250 || len(sleeper.waits) != 1 {
		t.Fatalf("yielded %d, waits %v; want 250 and one wait", len(seen), sleeper.waits)
	}
	resumed := 0
	for _, q := range list.queries {
		if v, _ := url.ParseQuery(q); v.Get("starting_after") == "pi_151" {
			resumed++
		}
	}
	if resumed != 1 {
		t.Fatalf("the failed page was served %d times after the failure, want 1", resumed)
	}
}
