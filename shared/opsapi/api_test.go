package opsapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/outbox"
)

const token = "test-operator-token"

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) Requeue(context.Context, deadletter.Target, string) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

type fixture struct {
	srv    *httptest.Server
	table  *deadletter.Records
	relay  *outbox.Relay
	sent   *counter
	record deadletter.Record
	log    *attempts.Log
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "ops.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := func() time.Time { return time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC) }
	sent := &counter{}
	tb := &deadletter.Records{Store: s, Requeuer: sent, Now: now, Log: slog.New(slog.DiscardHandler)}
	log, err := attempts.NewLog(attempts.Log{Store: s, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	body := json.RawMessage(`{"provider":"stripe","event_id":"evt_seed","body":"e30="}`)
	rec, _, err := tb.Open(context.Background(), deadletter.Record{Source: deadletter.SourceWebhook, Key: "webhook:stripe:evt_seed",
		Cause: deadletter.CauseProcessing, EventID: "evt_seed", Payload: body,
		Facts:  deadletter.Facts{EventID: "evt_seed", Provider: "stripe", Deliveries: 5},
		Tries:  []deadletter.Try{{At: now().Add(-time.Hour), Error: "delivered 5 times without success", MessageID: "m-1", ReceiveCount: 5}},
		Target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "webhooks", Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Record(context.Background(), attempts.Attempt{ID: "att_1", Direction: attempts.Inbound, Provider: "stripe",
		Operation: "webhook stripe", Method: "POST", Path: "/webhooks/stripe", Status: 200, EventID: "evt_seed", Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	h, err := opsapi.New(opsapi.Handler{Records: tb, Attempts: log, Token: token, Now: now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{deadletter.KindRetry: tb.RetryFollowOn()},
		Now: now, Log: slog.New(slog.DiscardHandler)}
	return fixture{srv: srv, table: tb, relay: relay, sent: sent, record: rec, log: log}
}

// deliver runs the outbox relay over the retries the API committed, as outbox-relay does.
func (f fixture) deliver(t *testing.T) {
	t.Helper()
	if _, _, err := f.relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) do(t *testing.T, method, path, body string, auth bool) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAPI(t *testing.T) {
	f := newFixture(t)
	id := f.record.ID
	tests := map[string]struct {
		method, path, body string
		auth               bool
		wantStatus         int
		wantBody           string
		problem            bool
	}{
		"no token":              {"GET", "/ops/deadletters", "", false, 401, "operator token", true},
		"list":                  {"GET", "/ops/deadletters?status=open&source=webhook", "", true, 200, id, false},
		"list bad filter":       {"GET", "/ops/deadletters?status=lost", "", true, 400, "status", true},
		"list unknown param":    {"GET", "/ops/deadletters?foo=1", "", true, 400, "unknown parameter", true},
		"detail":                {"GET", "/ops/deadletters/" + id, "", true, 200, "evt_seed", false},
		"detail unknown":        {"GET", "/ops/deadletters/dl_000000000000000000000000", "", true, 404, "No such record", true},
		"audit":                 {"GET", "/ops/deadletters/" + id + "/audit", "", true, 200, `"action":"opened"`, false},
		"override without note": {"POST", "/ops/deadletters/" + id + "/override", `{"outcome":"paid"}`, true, 400, "note", true},
		"override bad body":     {"POST", "/ops/deadletters/" + id + "/override", `{"outcome":1}`, true, 400, "body", true},
		"retry unknown":         {"POST", "/ops/deadletters/dl_x/retry", "", true, 404, "No such record", true},
		"retry no token":        {"POST", "/ops/deadletters/" + id + "/retry", "", false, 401, "", true},
		"lookup":                {"GET", "/ops/attempts?event_id=evt_seed", "", true, 200, "att_1", false},
		"lookup two keys":       {"GET", "/ops/attempts?event_id=a&payment_id=b", "", true, 400, "exactly one", true},
		"lookup none":           {"GET", "/ops/attempts", "", true, 400, "", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := f.do(t, tc.method, tc.path, tc.body, tc.auth)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body lacks %q: %s", tc.wantBody, body)
			}
			if ct := resp.Header.Get("Content-Type"); tc.problem != (ct == "application/problem+json") {
				t.Errorf("content type %s", ct)
			}
		})
	}
	f.deliver(t)
	if f.sent.n != 0 {
		t.Errorf("refused requests sent %d retries", f.sent.n)
	}
}

func TestAPIDoubleRetryRetriesOnce(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	results := make([]bool, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := f.do(t, "POST", "/ops/deadletters/"+f.record.ID+"/retry", "", true)
			var out struct{ Retried bool }
			if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
				t.Errorf("status %d body %s", resp.StatusCode, body)
			}
			results[i] = out.Retried
		}()
	}
	wg.Wait()
	f.deliver(t)
	if f.sent.n != 1 || results[0] == results[1] {
		t.Fatalf("two concurrent POSTs: %d re-enqueued, retried %v; want exactly one", f.sent.n, results)
	}
	rec, _ := f.table.Get(context.Background(), f.record.ID)
	last := rec.Audit[len(rec.Audit)-1]
	if rec.Status != deadletter.StatusRetrying || last.Action != "retry" || last.Actor != "operator" {
		t.Errorf("status %s audit %+v", rec.Status, last)
	}
}

func TestAPIOverrideAndSettle(t *testing.T) {
	f := newFixture(t)
	resp, body := f.do(t, "POST", "/ops/deadletters/"+f.record.ID+"/override", `{"outcome":"paid by transfer","note":"proof in ticket 42"}`, true)
	if resp.StatusCode != 200 || !strings.Contains(body, `"status":"overridden"`) || !strings.Contains(body, "proof in ticket 42") {
		t.Fatalf("override: %d %s", resp.StatusCode, body)
	}
	resp, body = f.do(t, "POST", "/ops/deadletters/"+f.record.ID+"/resolve", "", true)
	if resp.StatusCode != 409 {
		t.Errorf("resolve after override: %d %s", resp.StatusCode, body)
	}
}

func TestAPIBulkRetry(t *testing.T) {
	f := newFixture(t)
	resp, body := f.do(t, "POST", "/ops/deadletters/retry?source=webhook", `{"note":"provider outage over"}`, true)
	f.deliver(t)
	if resp.StatusCode != 200 || !strings.Contains(body, `"retried":1`) || f.sent.n != 1 {
		t.Fatalf("bulk: %d %s sent %d", resp.StatusCode, body, f.sent.n)
	}
}

func TestPrincipal(t *testing.T) {
	f := newFixture(t)
	h, err := opsapi.New(opsapi.Handler{Records: f.table, Principal: func(r *http.Request) (string, bool) {
		v := r.Header.Get("X-Test-Principal")
		return v, v != ""
	}, SessionKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		principal string
		want      int
	}{"authorized": {"arn:aws:iam::1:user/ops", 200}, "none": {"", 401}} {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/ops/deadletters", nil)
			if tc.principal != "" {
				req.Header.Set("X-Test-Principal", tc.principal)
			}
			req.Header.Set("Authorization", "Bearer "+token) // the token means nothing without Token set
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}
