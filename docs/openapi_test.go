// Tests of openapi.yaml: it is a valid OpenAPI 3.1 document, it documents exactly the routes
// the handlers register, and real answers of the handlers validate against it. The validator
// (pb33f/libopenapi-validator) is a test-only dependency: no Lambda binary links it.
package docs_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// spec is openapi.yaml parsed once, with its validator.
type spec struct {
	model *v3.Document
	v     validator.Validator
	opts  *config.ValidationOptions
}

var (
	specOnce sync.Once
	specVal  *spec
	specErr  error
)

func loadSpec(t *testing.T) *spec {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile("openapi.yaml")
		if err != nil {
			specErr = err
			return
		}
		doc, err := libopenapi.NewDocument(b)
		if err != nil {
			specErr = err
			return
		}
		m, err := doc.BuildV3Model()
		if err != nil {
			specErr = err
			return
		}
		// Formats (date-time, uri) are asserted, not just annotations: a timestamp that is not
		// RFC 3339 is a break of the document.
		opts := []config.Option{config.WithFormatAssertions()}
		v, errs := validator.NewValidator(doc, opts...)
		if len(errs) > 0 {
			specErr = fmt.Errorf("validator: %v", errs)
			return
		}
		specVal = &spec{model: &m.Model, v: v, opts: config.NewValidationOptions(opts...)}
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specVal
}

// TestOpenAPIDocumentIsValid validates openapi.yaml against the OpenAPI 3.1 schema (the
// make test step "openapi lint" checks it with Redocly CLI as well).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	s := loadSpec(t)
	if s.model.Version != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", s.model.Version)
	}
	if ok, errs := s.v.ValidateDocument(); !ok {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document:\n%s", describe(errs))
	}
}

// registered is every route the API's handlers register, as "METHOD /path/{param}".
//
// The operator handler is built fully configured (attempt log, recoveries, steering,
// reconciliation) so that every optional route is there. Its console routes (opsapi.Session
// and opsapi.Public: HTML pages, form posts and the sign-in flow, driven by a browser with a
// session cookie and a CSRF token) are left out of the document on purpose: they are not an
// API a program calls, and their answers are HTML and redirects. The local stack's test hooks
// (/ops/_faults, /ops/backfill, /events, /healthz) are no handler's routes and are not
// documented either.
func registered(t *testing.T) []string {
	t.Helper()
	ops, err := opsapi.New(opsapi.Handler{Records: (*deadletter.Records)(nil), Attempts: (*attempts.Log)(nil), Token: "t",
		Payments: opsapi.StorePayments{}, Recoveries: opsapi.StorePayments{}, Steer: (*recovery.Steerer)(nil),
		Reconcile: (*recon.Reconciler)(nil)})
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(payments.Routes())
	out = append(out, ingest.Pattern)
	for _, r := range ops.Routes() {
		if r.Access == opsapi.Bearer {
			out = append(out, r.Pattern)
		}
	}
	sort.Strings(out)
	return out
}

// documented is every operation of the document, as "METHOD /path/{param}".
func documented(s *spec) []string {
	var out []string
	for path, item := range s.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	s := loadSpec(t)
	reg, doc := registered(t), documented(s)
	if len(reg) < 15 {
		t.Fatalf("only %d routes registered: %v", len(reg), reg)
	}
	for _, r := range reg {
		if !slices.Contains(doc, r) {
			t.Errorf("registered but not in openapi.yaml: %s", r)
		}
	}
	for _, d := range doc {
		if !slices.Contains(reg, d) {
			t.Errorf("in openapi.yaml but no handler registers it: %s", d)
		}
	}
}

// exchange is one request to a real handler and its answer.
type exchange struct {
	name          string
	method, path  string // path with query
	header        http.Header
	body          []byte
	breaksRequest bool // the request breaks the document on purpose (a missing key, a bad body)

	status     int
	respHeader http.Header
	respBody   []byte
}

// client sends requests and keeps every exchange for validation.
type client struct {
	t    *testing.T
	mu   sync.Mutex
	seen []exchange
}

type req struct {
	base, method, path string
	header             map[string]string
	body               string
	breaks             bool
}

func (c *client) do(name string, r req) exchange {
	c.t.Helper()
	ex := c.send(name, r)
	c.keep(ex)
	return ex
}

// send makes the request without keeping it (polls for background work).
func (c *client) send(name string, r req) exchange {
	c.t.Helper()
	ex, err := sendRequest(name, r)
	if err != nil {
		c.t.Fatal(err)
	}
	return ex
}

func (c *client) keep(ex exchange) {
	c.mu.Lock()
	c.seen = append(c.seen, ex)
	c.mu.Unlock()
}

func sendRequest(name string, r req) (exchange, error) {
	hr, err := http.NewRequest(r.method, r.base+r.path, strings.NewReader(r.body))
	if err != nil {
		return exchange{}, err
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return exchange{}, fmt.Errorf("%s: %w", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return exchange{}, fmt.Errorf("%s: %w", name, err)
	}
	return exchange{name: name, method: r.method, path: r.path, header: hr.Header, body: []byte(r.body),
		breaksRequest: r.breaks, status: resp.StatusCode, respHeader: resp.Header, respBody: b}, nil
}

// validate checks every exchange against the document: a request that should conform does,
// one that breaks it on purpose does not, and every answer (status, headers, body) is
// documented. It returns the "METHOD /path status" answers seen.
func (s *spec) validate(t *testing.T, seen []exchange) map[string]bool {
	t.Helper()
	covered := map[string]bool{}
	for _, ex := range seen {
		// The document's first server is the local stack; paths are matched, not hosts.
		newReq := func() *http.Request {
			r, err := http.NewRequest(ex.method, "http://127.0.0.1:3000"+ex.path, bytes.NewReader(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			r.Header = ex.header.Clone()
			return r
		}
		_, _, tmpl := paths.FindPath(newReq(), s.model, s.opts)
		if tmpl == "" {
			t.Errorf("%s: %s %s matches no documented path", ex.name, ex.method, ex.path)
			continue
		}
		key := fmt.Sprintf("%s %s %d", ex.method, tmpl, ex.status)
		covered[key] = true
		ok, errs := s.v.ValidateHttpRequestSync(newReq())
		switch {
		case ex.breaksRequest && ok:
			t.Errorf("%s: the document accepts a request the handler refuses (%d %s)", ex.name, ex.status, ex.respBody)
		case !ex.breaksRequest && !ok:
			t.Errorf("%s: request breaks the document:\n%s", ex.name, describe(errs))
		}
		resp := &http.Response{StatusCode: ex.status, Header: ex.respHeader.Clone(), Body: io.NopCloser(bytes.NewReader(ex.respBody))}
		if ok, errs := s.v.ValidateHttpResponse(newReq(), resp); !ok {
			t.Errorf("%s: answer %s breaks the document:\n%s\nbody: %s", ex.name, key, describe(errs), ex.respBody)
		}
	}
	return covered
}

func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s", f.FieldPath, f.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func must(t *testing.T, ex exchange, status int) exchange {
	t.Helper()
	if ex.status != status {
		t.Fatalf("%s: status %d, want %d: %s", ex.name, ex.status, status, ex.respBody)
	}
	return ex
}
