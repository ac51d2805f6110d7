package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
)

// scriptedProvider answers Create from a script of outcomes keyed by payment method, and
// remembers every provider key it saw, like a provider's idempotency store would.
type scriptedProvider struct {
	mu      sync.Mutex
	calls   map[string]int // provider key -> calls
	made    []provider.Payment
	outcome func(req provider.CreateRequest, call int) (provider.Payment, error)
}

func (p *scriptedProvider) Create(_ context.Context, req provider.CreateRequest) (provider.Payment, error) {
	p.mu.Lock()
	p.calls[req.IdempotencyKey]++
	n := p.calls[req.IdempotencyKey]
	p.mu.Unlock()
	pay, err := p.outcome(req, n)
	if pay.ID != "" {
		p.mu.Lock()
		p.made = append(p.made, pay)
		p.mu.Unlock()
	}
	return pay, err
}

func (p *scriptedProvider) KeyHorizon() time.Duration { return provider.StripeKeyHorizon }

func (p *scriptedProvider) SearchMetadata(_ context.Context, key, value string) ([]provider.Payment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []provider.Payment
	for _, m := range p.made {
		if m.Metadata[key] == value {
			out = append(out, m)
		}
	}
	return out, nil
}
func (p *scriptedProvider) Get(context.Context, string) (provider.Payment, error) {
	return provider.Payment{}, errors.New("not scripted")
}
func (p *scriptedProvider) Confirm(context.Context, provider.ConfirmRequest) (provider.Payment, error) {
	return provider.Payment{}, errors.New("not scripted")
}
func (p *scriptedProvider) PaymentMethodCard(context.Context, string) (provider.Card, error) {
	return provider.Card{}, errors.New("not scripted")
}
func (p *scriptedProvider) List(context.Context, provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(func(provider.Payment, error) bool) {}
}

var created = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func outcomes(req provider.CreateRequest, call int) (provider.Payment, error) {
	pay := provider.Payment{ID: "pi_" + req.IdempotencyKey[10:20], Amount: req.Amount, Currency: req.Currency,
		Customer: req.Customer, Created: created, Metadata: req.Metadata}
	switch req.PaymentMethod {
	case "pm_card_visa":
		pay.Status = provider.StatusSucceeded
		return pay, nil
	case "pm_decline_funds":
		pay.Status = provider.StatusDeclined
		pay.Decline = &provider.Decline{Code: "insufficient_funds", ErrorCode: "card_declined"}
		pay.Card = &provider.Card{Fingerprint: "fp_funds", Brand: "visa", Last4: "9995"}
		return pay, &provider.DeclineError{Payment: pay}
	case "pm_timeout_once":
		if call == 1 {
			return provider.Payment{}, &provider.UnknownOutcomeError{Op: "create", IdempotencyKey: req.IdempotencyKey}
		}
		pay.Status = provider.StatusSucceeded
		return pay, nil
	case "pm_3ds":
		if req.OffSession {
			pay.Status = provider.StatusDeclined
			pay.Decline = &provider.Decline{Code: "authentication_required", ErrorCode: "authentication_required"}
			return pay, &provider.DeclineError{Payment: pay}
		}
		pay.Status = provider.StatusRequiresAction
		pay.ClientSecret = provider.ClientSecret(pay.ID + "_secret_s3cr3t")
		pay.NextAction = &provider.NextAction{Type: "use_stripe_sdk"}
		return pay, nil
	case "pm_hold":
		if req.CaptureMethod != provider.CaptureManual {
			return provider.Payment{}, errors.New("pm_hold needs manual capture")
		}
		pay.Status, pay.CaptureMethod, pay.AmountCapturable = provider.StatusRequiresCapture, provider.CaptureManual, req.Amount
		pay.CaptureBefore = created.Add(7 * 24 * time.Hour)
		return pay, nil
	case "pm_throttled":
		return provider.Payment{}, &provider.ThrottledError{Op: "create", RetryAfter: 3 * time.Second}
	case "pm_missing":
		return provider.Payment{}, &provider.PermanentError{Op: "create", StatusCode: 400, Code: "resource_missing"}
	}
	return provider.Payment{}, errors.New("unscripted payment method")
}

type jobs struct {
	mu   sync.Mutex
	list []ResolveJob
}

func (j *jobs) EnqueueResolve(_ context.Context, job ResolveJob) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.list = append(j.list, job)
	return nil
}

type declines struct {
	mu  sync.Mutex
	ids []string
}

func (d *declines) Declined(_ context.Context, p Payment) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, p.ID)
	return nil
}

type fixture struct {
	relay    *outbox.Relay
	svc      *Service
	prov     *scriptedProvider
	jobs     *jobs
	declines *declines
	h        http.Handler
	// clock is every part's clock; it stands still unless a test moves it.
	clock *clock.Fake
	// changes are the change messages the relay delivered, by id.
	changes map[string]Change
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	quiet := slog.New(slog.DiscardHandler)
	c := clock.NewFake(created.Add(time.Second))
	now := c.Now
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Now: now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{prov: &scriptedProvider{calls: map[string]int{}, outcome: outcomes}, jobs: &jobs{}, declines: &declines{}, clock: c}
	f.svc = &Service{Store: s, Keeper: k, Provider: f.prov, Resolver: f.jobs, OnDecline: f.declines, Now: now, Log: quiet,
		Classify: func(d provider.Decline) string { return "class-of-" + d.Code }}
	f.h = f.svc.Handler(func(*http.Request) string { return "local" })
	handlers := f.svc.FollowOns()
	f.changes = map[string]Change{}
	handlers[KindPublishChange] = func(_ context.Context, m outbox.Message) error {
		var c Change
		if err := json.Unmarshal(m.Payload, &c); err != nil {
			return err
		}
		f.changes[m.ID] = c
		return nil
	}
	f.relay = &outbox.Relay{Store: s, Handlers: handlers, Now: now, Log: quiet}
	return f
}

// drain delivers the outbox, as the relay does after each commit.
func (f *fixture) drain(t *testing.T) {
	t.Helper()
	if _, failed, err := f.relay.Drain(context.Background()); err != nil || failed != 0 {
		t.Fatalf("drain: %d failed, %v", failed, err)
	}
}

func (f *fixture) do(t *testing.T, method, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func body(pm string) string {
	return `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"` + pm + `"}`
}

func TestCreateOutcomes(t *testing.T) {
	cases := []struct {
		name        string
		pm          string
		status      int
		wantStatus  string
		declineCode string
		stored      bool // replayed with the same bytes
		replayed    bool // answered with Idempotent-Replayed
	}{
		{"success", "pm_card_visa", 201, "succeeded", "", true, true},
		{"decline", "pm_decline_funds", 402, "declined", "insufficient_funds", true, true},
		// A repeat of a pending key resumes it: the provider answers this time, and the repeat
		// gets the resolved payment, as a replay.
		{"unknown outcome", "pm_timeout_once", 202, "pending", "", false, true},
		{"throttled", "pm_throttled", 503, "", "", false, false},
		{"provider rejects", "pm_missing", 422, "", "", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			first := f.do(t, "POST", "/payments", "k-"+strings.ReplaceAll(tc.name, " ", "-"), body(tc.pm))
			if first.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", first.Code, tc.status, first.Body)
			}
			if tc.wantStatus != "" {
				var v View
				if err := json.Unmarshal(first.Body.Bytes(), &v); err != nil {
					t.Fatal(err)
				}
				if v.Status != tc.wantStatus || !strings.HasPrefix(v.ID, "pay_") || v.Amount != 1500 {
					t.Fatalf("view %+v", v)
				}
				if got := deref(v.DeclineCode); got != tc.declineCode {
					t.Fatalf("decline code %q, want %q", got, tc.declineCode)
				}
				if tc.declineCode != "" && deref(v.DeclineClass) != "class-of-"+tc.declineCode {
					t.Fatalf("decline class %v", deref(v.DeclineClass))
				}
				get := f.do(t, "GET", "/payments/"+v.ID, "", "")
				if get.Code != 200 || !strings.Contains(get.Body.String(), `"status":"`+tc.wantStatus+`"`) {
					t.Fatalf("GET %d %s", get.Code, get.Body)
				}
			}
			again := f.do(t, "POST", "/payments", "k-"+strings.ReplaceAll(tc.name, " ", "-"), body(tc.pm))
			replayed := again.Header().Get("Idempotent-Replayed") == "true"
			if replayed != tc.replayed {
				t.Fatalf("replayed=%v, want %v", replayed, tc.replayed)
			}
			if tc.stored && (again.Code != first.Code || again.Body.String() != first.Body.String()) {
				t.Fatalf("replay differs: %d %s vs %d %s", again.Code, again.Body, first.Code, first.Body)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestDeclineStartsRecoveryOnce(t *testing.T) {
	f := newFixture(t)
	for range 3 {
		f.do(t, "POST", "/payments", "k", body("pm_decline_funds"))
		f.drain(t)
	}
	if len(f.declines.ids) != 1 {
		t.Fatalf("recovery started %d times", len(f.declines.ids))
	}
	// The decline is one change, committed with the response: replays name the same message.
	if len(f.changes) != 1 {
		t.Fatalf("%d change messages, want 1: %v", len(f.changes), f.changes)
	}
	for _, c := range f.changes {
		if c.Payment.Status != provider.StatusDeclined || c.Version == 0 {
			t.Fatalf("change %+v", c)
		}
	}
}

func TestUnknownOutcomeResolvesInBackground(t *testing.T) {
	f := newFixture(t)
	first := f.do(t, "POST", "/payments", "k", body("pm_timeout_once"))
	if len(f.jobs.list) != 0 {
		t.Fatal("the resolve job was queued before the relay ran: it is outbox work")
	}
	f.drain(t)
	if first.Code != 202 || len(f.jobs.list) != 1 {
		t.Fatalf("first: %d, %d jobs", first.Code, len(f.jobs.list))
	}
	job := f.jobs.list[0]
	if err := f.svc.Resolve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	// The resolver stored the outcome: the client's retry replays it, and the provider saw the
	// same key both times.
	again := f.do(t, "POST", "/payments", "k", body("pm_timeout_once"))
	if again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after resolve: %d %v %s", again.Code, again.Header(), again.Body)
	}
	if len(f.prov.calls) != 1 {
		t.Fatalf("provider saw %d different keys", len(f.prov.calls))
	}
	get := f.do(t, "GET", "/payments/"+job.PaymentID, "", "")
	if !strings.Contains(get.Body.String(), `"status":"succeeded"`) {
		t.Fatalf("GET after resolve: %s", get.Body)
	}
	// Resolving again is harmless.
	if err := f.svc.Resolve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if n := f.prov.calls[provider.IdempotencyKey("local", "k")]; n != 2 {
		t.Fatalf("provider called %d times", n)
	}
}

// TestProblems sends every class of request POST /payments cannot process as sent, and every
// way the provider can refuse one, and checks each answer: its status, its stable problem type,
// the fields it names, and that no internal text (a package prefix, encoding/json's words, a Go
// type) reaches the caller.
func TestProblems(t *testing.T) {
	f := newFixture(t)
	valid := body("pm_card_visa")
	if w := f.do(t, "POST", "/payments", "used", valid); w.Code != 201 {
		t.Fatalf("setup: %d %s", w.Code, w.Body)
	}
	cases := map[string]struct {
		key, body string
		status    int
		typ       string
		fields    []string
	}{
		"no key":           {"", valid, 400, problem.KeyMissing, nil},
		"key with a space": {"a b", valid, 400, problem.KeyInvalid, nil},
		"not json":         {"k1", `amount=1`, 400, problem.MalformedRequest, nil},
		"cut short":        {"k1b", `{"amount":1`, 400, problem.MalformedRequest, nil},
		"empty":            {"k1c", ``, 400, problem.MalformedRequest, nil},
		"unknown field":    {"k2", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","tip":1}`, 400, problem.MalformedRequest, nil},
		"long unknown":     {"k2b", `{"` + strings.Repeat("t", 500) + `":1}`, 400, problem.MalformedRequest, nil},
		"wrong type":       {"k3", `{"amount":"1","currency":"usd","customer":"c","payment_method":"p"}`, 400, problem.MalformedRequest, nil},
		"float amount":     {"k4", `{"amount":1.5,"currency":"usd","customer":"c","payment_method":"p"}`, 400, problem.MalformedRequest, nil},
		"trailing data":    {"k4b", valid + `{}`, 400, problem.MalformedRequest, nil},
		"array body":       {"k10", `[1]`, 400, problem.MalformedRequest, nil},
		"zero amount":      {"k5", `{"amount":0,"currency":"usd","customer":"c","payment_method":"p"}`, 400, problem.InvalidRequest, []string{"amount"}},
		"two invalid":      {"k6", `{"amount":1,"currency":"USD","payment_method":"p"}`, 400, problem.InvalidRequest, []string{"currency", "customer"}},
		"bad currency":     {"k7", `{"amount":1,"currency":"abc","customer":"c","payment_method":"p"}`, 400, problem.InvalidRequest, []string{"currency"}},
		"reserved meta":    {"k9", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","metadata":{"twice_x":"1"}}`, 400, problem.InvalidRequest, []string{"metadata"}},
		"duplicate name":   {"k15", `{"amount":2000,"currency":"usd","customer":"c","payment_method":"p","amount":1}`, 400, problem.MalformedRequest, nil},
		"duplicate nested": {"k16", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","metadata":{"a":"1","a":"2"}}`, 400, problem.MalformedRequest, nil},
		"bracket meta key": {"k17", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","metadata":{"a[b]":"1"}}`, 400, problem.InvalidRequest, []string{"metadata"}},
		"49 meta keys":     {"k18", metadataBody(49, ""), 400, problem.InvalidRequest, []string{"metadata"}},
		"48 with invoice":  {"k19", metadataBody(48, "inv_1"), 400, problem.InvalidRequest, []string{"metadata"}},
		"capture method":   {"k20", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","capture_method":"later"}`, 400, problem.InvalidRequest, []string{"capture_method"}},
		"off_session type": {"k21", `{"amount":1,"currency":"usd","customer":"c","payment_method":"p","off_session":"yes"}`, 400, problem.MalformedRequest, nil},
		"too large":        {"k11", `{"description":"` + strings.Repeat("x", MaxBody) + `"}`, 413, problem.BodyTooLarge, nil},
		"key reused":       {"used", `{"amount":2500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa"}`, 422, problem.KeyReused, []string{"amount"}},
		"provider busy":    {"k12", body("pm_throttled"), 503, problem.ProviderBusy, nil},
		"provider refuses": {"k13", body("pm_missing"), 422, problem.ProviderRejected, nil},
		"provider fails":   {"k14", body("pm_unscripted"), 502, problem.ProviderUnreachable, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := f.do(t, "POST", "/payments", tc.key, tc.body)
			checkProblem(t, w, tc.status, tc.typ, tc.fields)
		})
	}
	t.Run("unknown payment", func(t *testing.T) {
		checkProblem(t, f.do(t, "GET", "/payments/pay_nope", "", ""), 404, problem.NotFound, nil)
	})
	t.Run("two Idempotency-Key headers", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/payments", strings.NewReader(valid))
		req.Header.Add("Idempotency-Key", "k20")
		req.Header.Add("Idempotency-Key", "k21")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		checkProblem(t, w, 400, problem.KeyInvalid, nil)
	})
	// What the provider allows once twice's own keys are counted is accepted.
	for key, b := range map[string]string{"k22": metadataBody(48, ""), "k23": metadataBody(47, "inv_1")} {
		if w := f.do(t, "POST", "/payments", key, b); w.Code != 201 {
			t.Errorf("%s: metadata at the limit: %d %s", key, w.Code, w.Body)
		}
	}
	// A request that cannot be processed leaves the key free for the corrected one.
	if w := f.do(t, "POST", "/payments", "k5", valid); w.Code != 201 {
		t.Fatalf("corrected request: %d %s", w.Code, w.Body)
	}
}

// metadataBody is a valid payment with n metadata keys (and an invoice when one is given).
func metadataBody(n int, invoice string) string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = "v"
	}
	b, _ := json.Marshal(map[string]any{"amount": 2500, "currency": "usd", "customer": "cus_1", "payment_method": "pm_card_visa",
		"metadata": m, "invoice": invoice})
	return string(b)
}

// TestEmptyMetadataIsNoMetadata: "metadata":{} (or null) and no metadata are one request under
// one key: the second is a replay, not a 422.
func TestEmptyMetadataIsNoMetadata(t *testing.T) {
	f := newFixture(t)
	plain := body("pm_card_visa")
	first := f.do(t, "POST", "/payments", "meta-empty", plain)
	if first.Code != 201 {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	for _, extra := range []string{`"metadata":{}`, `"metadata": { }`, `"metadata":null`} {
		b := strings.TrimSuffix(plain, "}") + "," + extra + "}"
		w := f.do(t, "POST", "/payments", "meta-empty", b)
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != first.Body.String() {
			t.Errorf("%s under the same key: %d %s", extra, w.Code, w.Body)
		}
	}
	if w := f.do(t, "POST", "/payments", "meta-empty", strings.TrimSuffix(plain, "}")+`,"metadata":{"a":"1"}}`); w.Code != 422 {
		t.Errorf("real metadata under the same key: %d, want 422", w.Code)
	}
}

func checkProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string, fields []string) {
	t.Helper()
	if w.Code != status || w.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("%d %s, want %d problem+json: %s", w.Code, w.Header().Get("Content-Type"), status, w.Body)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
		Fields              []string
		ProviderCode        string `json:"provider_code"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != problem.TypeBase+typ || p.Status != status || p.Title == "" {
		t.Fatalf("type %q status %d title %q, want %s: %s", p.Type, p.Status, p.Title, typ, w.Body)
	}
	if fields != nil && !slices.Equal(p.Fields, fields) {
		t.Fatalf("fields %v, want %v", p.Fields, fields)
	}
	if typ == problem.ProviderRejected && p.ProviderCode != "resource_missing" {
		t.Fatalf("provider_code %q", p.ProviderCode)
	}
	for _, internal := range []string{"payments:", "idempotency:", "json:", "int64", "CreateRequest", "Go struct", "unscripted"} {
		if strings.Contains(w.Body.String(), internal) {
			t.Fatalf("internal text %q reaches the caller: %s", internal, w.Body)
		}
	}
	if len(w.Body.String()) > 2048 {
		t.Fatalf("problem of %d bytes: the caller's input is not capped", w.Body.Len())
	}
}

// TestProblemTypesDocumented: every problem type has its row, and its anchor, in the README.
func TestProblemTypesDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{problem.MalformedRequest, problem.InvalidRequest, problem.BodyTooLarge, problem.KeyMissing,
		problem.KeyInvalid, problem.KeyInProgress, problem.KeyReused, problem.NotFound, problem.ProviderBusy,
		problem.ProviderUnreachable, problem.ProviderRejected, problem.Internal, problem.WebhookUnverified, problem.Unavailable, problem.Unauthorized,
		problem.RecordClosed, problem.NothingToRetry, problem.RecordChanged, problem.ReconcileFailed,
		problem.NoRunningRecovery, problem.TooManyAttempts, problem.PaymentNotRefundable, problem.RefundTooLarge} {
		if !strings.Contains(string(readme), `<a id="problem-`+typ+`"></a>`) {
			t.Errorf("README has no anchor for problem type %s", typ)
		}
	}
}

func FuzzParseCreateRequest(f *testing.F) {
	for _, s := range []string{body("pm_card_visa"), `{}`, `[]`, `{"amount":1e400}`, `{"metadata":{"a":null}}`, `{"amount":-1}`, `{"amount":1,"amount":2}`, `{"metadata":{"a[b]":"1"}}`,
		`{"amount":1,"currency":"usd","customer":"c","payment_method":"p","off_session":true,"capture_method":"manual"}`,
		`{"capture_method":"automatic","off_session":null}`, `{"capture_method":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseCreateRequest(b)
		if err != nil {
			var invalid *InvalidError
			if !errors.As(err, &invalid) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if req.Amount <= 0 || req.Customer == "" || req.PaymentMethod == "" || !validCurrency(req.Currency) ||
			(req.CaptureMethod != "" && req.CaptureMethod != CaptureManual) {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
	})
}
