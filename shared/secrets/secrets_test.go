package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"one":             {"whsec_a", []string{"whsec_a"}},
		"comma":           {"whsec_new,whsec_old", []string{"whsec_new", "whsec_old"}},
		"newlines, crlf":  {"whsec_new\r\nwhsec_old\n", []string{"whsec_new", "whsec_old"}},
		"spaces, empties": {" a , ,\n b ", []string{"a", "b"}},
		"empty":           {"", []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Split(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Split(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{"TWICE_STRIPE_WEBHOOK_SECRET": "whsec_x,whsec_y"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := FromEnv(lookup, map[string]EnvVar{
		"stripe":   {Name: "TWICE_STRIPE_WEBHOOK_SECRET", Default: "whsec_default"},
		"standard": {Name: "TWICE_STANDARD_WEBHOOK_SECRET", Default: "whsec_c3RhbmRhcmQ="},
		"none":     {Name: "UNSET"},
	})
	tests := map[string]struct {
		want []string
		err  error
	}{
		"stripe":   {want: []string{"whsec_x", "whsec_y"}},
		"standard": {want: []string{"whsec_c3RhbmRhcmQ="}},
		"none":     {err: ErrNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Secrets(context.Background(), name)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

type fakeGetter struct {
	vals  map[string]string
	err   error
	calls int
}

func (f *fakeGetter) Get(_ context.Context, name string) (string, error) {
	f.calls++
	if f.err != nil {
		return "", f.err
	}
	v, ok := f.vals[name]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return v, nil
}

func TestCachedRefreshAndLastGood(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	g := &fakeGetter{vals: map[string]string{"k": "whsec_FIRSTVALUE,whsec_SECONDVALUE", "blank": " , "}}
	var logs bytes.Buffer
	src := &Cached{Getter: g, Now: func() time.Time { return now },
		Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx := context.Background()

	tests := []struct {
		name    string
		advance time.Duration
		value   string
		fail    error
		want    string
		calls   int
	}{
		{name: "first read fetches", want: "whsec_FIRSTVALUE|whsec_SECONDVALUE", calls: 1},
		{name: "a change is not seen before Refresh", advance: DefaultRefresh - time.Second, value: "whsec_ROTATEDVALUE", want: "whsec_FIRSTVALUE|whsec_SECONDVALUE", calls: 1},
		{name: "refreshed after Refresh", advance: time.Second, want: "whsec_ROTATEDVALUE", calls: 2},
		{name: "failed refresh serves last good", advance: DefaultRefresh, fail: errors.New("throttled"), want: "whsec_ROTATEDVALUE", calls: 3},
		{name: "retry waits RetryAfter", advance: 10 * time.Second, fail: errors.New("throttled"), want: "whsec_ROTATEDVALUE", calls: 3},
		{name: "after RetryAfter fetches again", advance: DefaultRetryAfter, want: "whsec_ROTATEDVALUE", calls: 4},
	}
	for _, tc := range tests {
		now = now.Add(tc.advance)
		if tc.value != "" {
			g.vals["k"] = tc.value
		}
		g.err = tc.fail
		got, err := src.Secrets(ctx, "k")
		if err != nil || strings.Join(got, "|") != tc.want || g.calls != tc.calls {
			t.Fatalf("%s: %v %v after %d calls", tc.name, got, err, g.calls)
		}
	}
	if !strings.Contains(logs.String(), "serving the last good value") {
		t.Fatalf("the failed refresh was not logged: %s", logs.String())
	}
	for _, v := range []string{"FIRSTVALUE", "SECONDVALUE", "ROTATEDVALUE"} {
		if strings.Contains(logs.String(), v) {
			t.Fatalf("a secret value reached the log: %s", logs.String())
		}
	}
	g.err = nil
	if _, err := src.Secrets(ctx, "blank"); !errors.Is(err, ErrEmpty) {
		t.Fatalf("blank: %v", err)
	}
	if _, err := src.Secrets(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// A failing store with nothing cached is an error that names the secret and not its value, and
// is not cached: the next call tries again.
func TestCachedUnavailableWithoutCache(t *testing.T) {
	g := &fakeGetter{err: errors.New("throttled")}
	src := &Cached{Getter: g}
	_, err := src.Secrets(t.Context(), "/twice/stripe")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "/twice/stripe") {
		t.Fatalf("err = %v", err)
	}
	_, _ = src.Secrets(t.Context(), "/twice/stripe")
	if g.calls != 2 {
		t.Fatalf("calls = %d, want 2", g.calls)
	}
}
