package rie

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// The API stand-in routes as API Gateway does, with template.yaml's routes: the most specific
// route wins across functions, path variables fill PathParameters, and a JWT route with
// scopes refuses a token without one (403) before any function runs.
func TestAPIRoutesAsTheTemplate(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	gws := map[string]*Gateway{}
	var api API
	for _, fn := range []string{"payments-api", "webhook-ingest", "operator-api"} {
		routes, err := TemplateRoutes(filepath.Join(root, "template.yaml"), fn)
		if err != nil {
			t.Fatal(err)
		}
		gws[fn] = &Gateway{Routes: routes}
		api = append(api, gws[fn])
	}
	for name, tc := range map[string]struct {
		method, path, fn, route string
		params                  map[string]string
		scopes                  bool
	}{
		"create":           {"POST", "/payments", "payments-api", "/payments", nil, false},
		"read":             {"GET", "/payments/pay_1", "payments-api", "/payments/{id}", map[string]string{"id": "pay_1"}, false},
		"webhook":          {"POST", "/webhooks/stripe", "webhook-ingest", "/webhooks/{provider}", map[string]string{"provider": "stripe"}, false},
		"console":          {"GET", "/ops/", "operator-api", "/ops", nil, false},
		"dead letters":     {"GET", "/ops/deadletters", "operator-api", "/ops/deadletters", nil, true},
		"dead letter item": {"POST", "/ops/deadletters/dl_1/retry", "operator-api", "/ops/deadletters/{proxy+}", map[string]string{"proxy": "dl_1/retry"}, true},
		"attempts":         {"GET", "/ops/attempts", "operator-api", "/ops/attempts", nil, true},
		"console page":     {"GET", "/ops/login", "operator-api", "/ops/{proxy+}", map[string]string{"proxy": "login"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			var best string
			var route Route
			var params map[string]string
			top := 0
			for fn, g := range gws {
				if r, p, score := g.match(tc.method, tc.path); score > top {
					best, route, params, top = fn, r, p, score
				}
			}
			if best != tc.fn || route.Path != tc.route || !maps.Equal(params, tc.params) || (len(route.Scopes) > 0) != tc.scopes {
				t.Fatalf("%s %s went to %s %+v %v, want %s %s %v (scopes %v)", tc.method, tc.path, best, route, params, tc.fn, tc.route, tc.params, tc.scopes)
			}
		})
	}
	// A token without the operations scope never reaches operator-api (which is not running).
	gws["operator-api"].Verify = func(_ context.Context, tok string) (map[string]string, error) {
		return map[string]string{"sub": "c", "scope": "twice/payments"}, nil
	}
	req := httptest.NewRequest(http.MethodGet, "/ops/attempts?payment_id=pay_1", nil)
	req.Header.Set("Authorization", "Bearer x")
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Fatalf("a payments token at /ops/attempts: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("no route: %d", w.Code)
	}
}
