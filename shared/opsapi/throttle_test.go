package opsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/opsapi"
)

// TestFailedCredentialsAreThrottledPerSource: after Max failed bearer tokens or logins from
// one address within the window, that address gets 429 problem+json with Retry-After (a right
// token too, or a guesser would learn from the difference) until the window ends on the
// fake clock; another address signs in meanwhile.
func TestFailedCredentialsAreThrottledPerSource(t *testing.T) {
	f := newFixture(t)
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for name, try := range map[string]func(h http.Handler, src, secret string) *httptest.ResponseRecorder{
		"bearer": func(h http.Handler, src, secret string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", "/ops/deadletters", nil)
			r.RemoteAddr, r.Header["Authorization"] = src+":40000", []string{"Bearer " + secret}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		},
		"login": func(h http.Handler, src, secret string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/ops/login", strings.NewReader(url.Values{"token": {secret}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = src + ":40000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(start)
			h, err := opsapi.New(opsapi.Handler{Records: f.table, Token: token, Now: clk.Now,
				Failures: opsapi.NewFailureLimiter(opsapi.FailureLimiter{Max: 3, Window: time.Minute, Clock: clk})})
			if err != nil {
				t.Fatal(err)
			}
			ok := map[string]int{"bearer": 200, "login": 303}[name]
			wrong := map[string]int{"bearer": 401, "login": 401}[name]
			for i := range 3 {
				if w := try(h, "192.0.2.1", "guess"); w.Code != wrong {
					t.Fatalf("failure %d: %d, want %d", i+1, w.Code, wrong)
				}
			}
			w := try(h, "192.0.2.1", token)
			if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" ||
				w.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(w.Body.String(), "too-many-attempts") {
				t.Fatalf("after 3 failures, the right token: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
			}
			if w := try(h, "198.51.100.7", token); w.Code != ok {
				t.Fatalf("another source with the right token: %d, want %d", w.Code, ok)
			}
			clk.Advance(59 * time.Second)
			if w := try(h, "192.0.2.1", token); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
				t.Fatalf("59 s later: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
			}
			clk.Advance(time.Second)
			if w := try(h, "192.0.2.1", token); w.Code != ok {
				t.Fatalf("when the window ends: %d, want %d", w.Code, ok)
			}
		})
	}
}

// TestMissingTokenIsNotAGuess: a request without credentials (a browser, a health probe) is
// answered 401 without counting against its source.
func TestMissingTokenIsNotAGuess(t *testing.T) {
	f := newFixture(t)
	h, err := opsapi.New(opsapi.Handler{Records: f.table, Token: token,
		Failures: opsapi.NewFailureLimiter(opsapi.FailureLimiter{Max: 1, Clock: clock.NewFake(time.Unix(0, 0))})})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		r := httptest.NewRequest("GET", "/ops/deadletters", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("no token: %d", w.Code)
		}
	}
}

// TestFailureTableIsBounded: a flood of addresses never grows the table past Sources; expired
// windows go first, then the oldest.
func TestFailureTableIsBounded(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	l := opsapi.NewFailureLimiter(opsapi.FailureLimiter{Max: 2, Window: time.Minute, Sources: 100, Clock: clk})
	for i := range 10_000 {
		l.Fail("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
		clk.Advance(time.Millisecond)
	}
	if n := l.Len(); n != 100 {
		t.Fatalf("%d sources tracked, want the cap of 100", n)
	}
	// The newest source is still counted: a second failure blocks it.
	l.Fail("10.0.39.15")
	if _, blocked := l.Blocked("10.0.39.15"); !blocked {
		t.Fatal("the newest source was evicted")
	}
	clk.Advance(time.Minute)
	l.Fail("203.0.113.1")
	if n := l.Len(); n > 100 {
		t.Fatalf("%d sources after expiry", n)
	}
}

// TestOperatorHeaderNamesTheActor: with the shared token, the audit trail records the person
// the caller names (twicectl --as); an authenticated principal (the JWT's sub in AWS) is
// recorded whatever the header says.
func TestOperatorHeaderNamesTheActor(t *testing.T) {
	for name, tc := range map[string]struct {
		principal, header, want string
	}{
		"token, named":          {header: "ana", want: "operator:ana"},
		"token, unnamed":        {want: "operator"},
		"principal wins":        {principal: "jwt:operator-ana", header: "mallory", want: "jwt:operator-ana"},
		"principal, no header":  {principal: "jwt:operator-ana", want: "jwt:operator-ana"},
		"name kept printable":   {header: "bo|b\x01", want: "operator:bob"},
		"name capped at 40 too": {header: strings.Repeat("x", 100), want: "operator:" + strings.Repeat("x", 40)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			h, err := opsapi.New(opsapi.Handler{Records: f.table, Token: token, Principal: func(*http.Request) (string, bool) {
				return tc.principal, tc.principal != ""
			}})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/ops/deadletters/"+f.record.ID+"/retry", strings.NewReader(`{"note":"x"}`))
			r.Header.Set("Authorization", "Bearer "+token)
			if tc.header != "" {
				r.Header.Set(opsapi.OperatorHeader, tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("retry: %d %s", w.Code, w.Body)
			}
			rec, err := f.table.Get(context.Background(), f.record.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Audit[len(rec.Audit)-1].Actor; got != tc.want {
				t.Fatalf("audited as %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFailureLimiterDefaults: what the README states for the local stack, 10 failures a minute
// per source: the tenth blocks the source for what remains of the minute.
func TestFailureLimiterDefaults(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	l := opsapi.NewFailureLimiter(opsapi.FailureLimiter{Clock: clk})
	for i := range 9 {
		l.Fail("192.0.2.1")
		if _, blocked := l.Blocked("192.0.2.1"); blocked {
			t.Fatalf("blocked after %d failures", i+1)
		}
		clk.Advance(time.Second)
	}
	l.Fail("192.0.2.1")
	if wait, blocked := l.Blocked("192.0.2.1"); !blocked || wait != 51*time.Second {
		t.Fatalf("after 10 failures in 9 s: blocked %v for %s, want 51 s", blocked, wait)
	}
	clk.Advance(51 * time.Second)
	if _, blocked := l.Blocked("192.0.2.1"); blocked {
		t.Fatal("still blocked a minute after the first failure")
	}
}
