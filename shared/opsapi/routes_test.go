package opsapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/recovery"
)

// TestRoutesSayWhatTheyAsk: each route's declared Access is what it does to a caller with no
// credentials. API Gateway's route table is checked against this list, so a route that
// declared less than it asks would be left unreachable there, and one that declared more
// would be left open.
func TestRoutesSayWhatTheyAsk(t *testing.T) {
	f := newFixture(t)
	h, err := opsapi.New(opsapi.Handler{Records: f.table, Token: token, Attempts: f.log,
		Recoveries: opsapi.StorePayments{Store: f.table.Store}, Steer: &recovery.Steerer{Store: f.table.Store}})
	if err != nil {
		t.Fatal(err)
	}
	routes := h.Routes()
	if len(routes) < 20 {
		t.Fatalf("%d routes; want every JSON and console route", len(routes))
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if seen[r.Pattern] {
			t.Errorf("%s listed twice", r.Pattern)
		}
		seen[r.Pattern] = true
		method, path, _ := strings.Cut(r.Pattern, " ")
		path = strings.NewReplacer("{id}", "x", "{action}", "retry", "{$}", "").Replace(path)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader("")))
		got := w.Code
		switch r.Access {
		case opsapi.Bearer:
			if got != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s (bearer) without a token: %d, want 401", r.Pattern, got)
			}
		case opsapi.Session:
			if got != http.StatusSeeOther || w.Header().Get("Location") != "/ops/login" {
				t.Errorf("%s (session) without a session: %d to %q, want 303 to /ops/login", r.Pattern, got, w.Header().Get("Location"))
			}
		case opsapi.Public:
			// The sign-in form may refuse a wrong token; it never asks for a bearer one.
			if w.Header().Get("WWW-Authenticate") != "" || w.Header().Get("Location") == "/ops/login" {
				t.Errorf("%s (public) refused a caller with no credentials: %d", r.Pattern, got)
			}
		}
	}
}
