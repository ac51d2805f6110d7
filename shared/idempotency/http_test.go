package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// paymentHandler is a stand-in for an effectful handler: it stages its payment with the
// response and counts how often it really ran.
func paymentHandler(runs *atomic.Int64, gate chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if gate != nil {
			<-gate
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "unknown") {
			NotFinal(r.Context())
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprintf(w, `{"status":"pending","run":%d}`, n)
			return
		}
		if strings.Contains(string(body), "explode") {
			http.Error(w, "provider down", http.StatusBadGateway)
			return
		}
		id := fmt.Sprintf("pay_%d", n)
		Stage(r.Context(), store.Write{Table: "payments", Put: &store.Item{PK: id, Doc: body}})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+id)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, id)
	})
}

func post(t *testing.T, h http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	if key != "" {
		r.Header.Set(HeaderKey, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddleware(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		var runs atomic.Int64
		h := newKeeper(t, s, newClock()).Middleware(MiddlewareConfig{MaxBody: 64})(paymentHandler(&runs, nil))

		first := post(t, h, "k1", `{"amount":100,"currency":"usd"}`)
		if first.Code != 201 || first.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("first: %d %v", first.Code, first.Header())
		}
		again := post(t, h, "k1", `{"currency":"usd", "amount":100}`)
		if again.Code != 201 || again.Body.String() != first.Body.String() || again.Header().Get(HeaderReplayed) != "true" ||
			again.Header().Get("Location") != first.Header().Get("Location") || again.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("replay: %d %q %v", again.Code, again.Body, again.Header())
		}
		if runs.Load() != 1 {
			t.Fatalf("handler ran %d times", runs.Load())
		}
		if _, err := s.Get(context.Background(), "payments", "pay_1", ""); err != nil {
			t.Fatalf("staged effect missing: %v", err)
		}

		cases := []struct {
			name, key, body string
			status          int
			check           func(t *testing.T, w *httptest.ResponseRecorder)
		}{
			{"missing key", "", `{}`, 400, nil},
			{"bad key", "a b", `{}`, 400, nil},
			{"too large", "k2", `{"pad":"` + strings.Repeat("x", 100) + `"}`, 413, nil},
			{"mismatch", "k1", `{"amount":200,"currency":"usd"}`, 422, func(t *testing.T, w *httptest.ResponseRecorder) {
				var p struct{ Fields []string }
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || fmt.Sprint(p.Fields) != "[amount]" {
					t.Fatalf("fields %v (%v)", p.Fields, err)
				}
			}},
			{"5xx is not stored", "k3", `{"explode":1}`, 502, nil},
			{"5xx retried runs again", "k3", `{"explode":1}`, 502, nil},
			{"unknown outcome is not stored", "k4", `{"unknown":1}`, 202, nil},
			{"unknown outcome retried runs again", "k4", `{"unknown":1}`, 202, func(t *testing.T, w *httptest.ResponseRecorder) {
				if w.Header().Get(HeaderReplayed) != "" {
					t.Fatal("a not-final response was replayed")
				}
			}},
		}
		for _, tc := range cases {
			before := runs.Load()
			w := post(t, h, tc.key, tc.body)
			if w.Code != tc.status {
				t.Fatalf("%s: status %d, want %d: %s", tc.name, w.Code, tc.status, w.Body)
			}
			if tc.status >= 400 && tc.status < 500 && w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s: content type %q", tc.name, w.Header().Get("Content-Type"))
			}
			if ran := runs.Load() - before; (tc.status == 502 || tc.status == 202) != (ran == 1) {
				t.Fatalf("%s: handler ran %d times", tc.name, ran)
			}
			if tc.check != nil {
				tc.check(t, w)
			}
		}
	})
}

func TestMiddlewareConcurrentDuplicates(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		var runs atomic.Int64
		gate := make(chan struct{})
		h := newKeeper(t, s, newClock()).Middleware(MiddlewareConfig{})(paymentHandler(&runs, gate))
		type answer struct {
			code       int
			body       string
			retryAfter string
		}
		answers := make(chan answer, 50)
		for range 50 {
			go func() {
				w := post(t, h, "same", `{"amount":1}`)
				answers <- answer{w.Code, w.Body.String(), w.Header().Get("Retry-After")}
			}()
		}
		// The winner holds the key until the gate opens, so the other 49 answer first; a
		// second winner would block too and the bound below would fail the test.
		var got []answer
		timeout := time.After(30 * time.Second)
		for len(got) < 49 {
			select {
			case a := <-answers:
				got = append(got, a)
			case <-timeout:
				t.Fatalf("only %d answers while the winner held the key (handler ran %d times)", len(got), runs.Load())
			}
		}
		close(gate)
		got = append(got, <-answers)
		created := 0
		for i, a := range got {
			switch {
			case a.code == 201:
				created++
			case a.code == 409 && a.retryAfter != "":
			default:
				t.Fatalf("answer %d: %d %q retry-after %q", i, a.code, a.body, a.retryAfter)
			}
		}
		if created != 1 || runs.Load() != 1 || got[49].code != 201 {
			t.Fatalf("created %d, handler ran %d times", created, runs.Load())
		}
	})
}
