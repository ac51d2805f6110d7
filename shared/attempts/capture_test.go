package attempts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/redact"
)

// collector is a RecordFunc that keeps what it is given.
type collector struct {
	mu   sync.Mutex
	got  []Attempt
	ctxs []context.Context
}

func (c *collector) record(ctx context.Context, a Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, a)
	c.ctxs = append(c.ctxs, ctx)
}

func (c *collector) attempts() []Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Attempt(nil), c.got...)
}

// tick is a clock that moves a fixed step each time it is read.
func tick(step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

func TestTransportRecordsCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_1")
		w.Header().Set("Set-Cookie", "sid=1")
		w.WriteHeader(http.StatusPaymentRequired)
		io.WriteString(w, `{"error":{"code":"card_declined","echo":"`+string(body)+`"}}`)
	}))
	defer srv.Close()

	var c collector
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Record: c.record, Provider: "stripe", Now: tick(time.Millisecond)}}
	ctx := WithOperation(WithCorrelationID(WithPaymentID(context.Background(), "pay_1"), "corr_1"), "payment_intents.create")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/payment_intents?expand[]=latest_charge", strings.NewReader("amount=1000&card[cvc]=123"))
	req.Header.Set("Authorization", "Bearer sk_test_abc")
	req.Header.Set("Idempotency-Key", "idem_1")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.attempts()) != 0 {
		t.Fatal("recorded before the body was read")
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "card[cvc]=123") {
		t.Errorf("caller got a changed body: %s", body)
	}
	got := c.attempts()
	if len(got) != 1 {
		t.Fatalf("recorded %d attempts, want 1", len(got))
	}
	a := got[0]
	checks := map[string]struct{ got, want any }{
		"direction":       {a.Direction, Outbound},
		"provider":        {a.Provider, "stripe"},
		"operation":       {a.Operation, "payment_intents.create"},
		"method":          {a.Method, "POST"},
		"path":            {a.Path, "/v1/payment_intents?expand[]=latest_charge"},
		"status":          {a.Status, 402},
		"outcome":         {a.Result, ResultDeclined},
		"idempotency key": {a.IdempotencyKey, "idem_1"},
		"payment id":      {a.PaymentID, "pay_1"},
		"correlation id":  {a.CorrelationID, "corr_1"},
		"authorization":   {a.RequestHeader["Authorization"], "Bearer [redacted]"},
		"set-cookie":      {a.ResponseHeader["Set-Cookie"], redact.Redacted},
		"request-id":      {a.ResponseHeader["Request-Id"], "req_1"},
		"request body":    {a.RequestBody, "amount=1000&card[cvc]=123"}, // redacted by Record
		"request bytes":   {a.RequestBytes, 25},
		"response body":   {a.ResponseBody, string(body)},
		"response bytes":  {a.ResponseBytes, len(body)},
		"started":         {a.StartedAt, t0.Add(time.Millisecond)},
		"duration":        {a.Duration, time.Millisecond},
	}
	for name, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", name, ck.got, ck.want)
		}
	}
	if c.ctxs[0].Err() != nil {
		t.Error("recorded with a cancelled context")
	}
}

func TestTransportDoesNotBufferStream(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release // the rest only after the caller has read the first chunk
		io.WriteString(w, "second\n")
	}))
	defer srv.Close()
	var c collector
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Record: c.record}}
	resp, err := client.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first chunk %q, %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second\n" {
		t.Errorf("rest %q", rest)
	}
	got := c.attempts()
	if len(got) != 1 || got[0].ResponseBody != "first\nsecond\n" || got[0].Operation != "GET /stream" {
		t.Errorf("recorded %+v", got)
	}
	resp.Body.Close() // a second chance to record must not record twice
	if len(c.attempts()) != 1 {
		t.Errorf("recorded %d times", len(c.attempts()))
	}
}

func TestTransportCapturesUpToLimit(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(big)
	}))
	defer srv.Close()
	var c collector
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Record: c.record, CaptureLimit: 100}}
	resp, err := client.Post(srv.URL, "text/plain", bytes.NewReader(big[:300]))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(got) != len(big) {
		t.Errorf("caller read %d bytes, want %d", len(got), len(big))
	}
	a := c.attempts()[0]
	if len(a.RequestBody) != 100 || !a.RequestTruncated || a.RequestBytes != 300 {
		t.Errorf("request: %d bytes kept of %d, truncated %v", len(a.RequestBody), a.RequestBytes, a.RequestTruncated)
	}
	if len(a.ResponseBody) != 100 || !a.ResponseTruncated || a.ResponseBytes != 1000 {
		t.Errorf("response: %d bytes kept of %d, truncated %v", len(a.ResponseBody), a.ResponseBytes, a.ResponseTruncated)
	}
}

func TestTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	url := srv.URL
	srv.Close() // nothing listens any more

	expired, cancel := context.WithDeadline(context.Background(), t0) // long past
	defer cancel()
	tests := map[string]struct {
		ctx     context.Context
		outcome string
	}{
		"connection refused": {context.Background(), ResultError},
		"deadline passed":    {expired, ResultTimeout},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c collector
			client := &http.Client{Transport: &Transport{Record: c.record, Provider: "stripe"}}
			req, _ := http.NewRequestWithContext(WithPaymentID(tc.ctx, "pay_1"), "POST", url+"/v1/x?k=sk_live_abc", strings.NewReader("a=1"))
			if _, err := client.Do(req); err == nil {
				t.Fatal("no error")
			}
			got := c.attempts()
			if len(got) != 1 {
				t.Fatalf("recorded %d", len(got))
			}
			a := got[0]
			if a.Result != tc.outcome || a.Err == "" || a.Status != 0 || a.PaymentID != "pay_1" {
				t.Errorf("recorded %+v", a)
			}
			if c.ctxs[0].Err() != nil {
				t.Error("recorded with a cancelled context: the store write would fail")
			}
		})
	}
}

func TestTransportNeverFailsOnRecorder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	rec := BestEffort(failingRecorder{errors.New("store down")}, slog.New(slog.DiscardHandler))
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Record: rec}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "ok" {
		t.Errorf("caller got %q, %v", body, err)
	}
}

func TestTransportIntoLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"pi_1","client_secret":"pi_1_secret_abc","status":"succeeded"}`)
	}))
	defer srv.Close()
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Record: BestEffort(l, nil), Provider: "stripe"}}
	req, _ := http.NewRequestWithContext(WithPaymentID(context.Background(), "pay_1"), "POST", srv.URL+"/v1/payment_intents",
		strings.NewReader("amount=1000&payment_method_data[card][number]=4242424242424242"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p, err := l.Lookup(context.Background(), ByPaymentID, "pay_1", "")
	if err != nil || len(p.Attempts) != 1 {
		t.Fatalf("lookup: %v %v", p.Attempts, err)
	}
	if p.Attempts[0].RequestBody != "" {
		t.Errorf("lookup summaries carry bodies")
	}
	a, err := l.Get(context.Background(), p.Attempts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.RequestBody != "amount=1000&payment_method_data[card][number]=[card+****4242]" {
		t.Errorf("request body %q", a.RequestBody)
	}
	if a.ResponseBody != `{"id":"pi_1","client_secret":"[redacted]","status":"succeeded"}` {
		t.Errorf("response body %q", a.ResponseBody)
	}
}

func TestFromRequest(t *testing.T) {
	tests := map[string]struct {
		status     int
		header     map[string]string
		ctx        func(context.Context) context.Context
		wantResult string
		wantEvent  string
		wantCorr   string
	}{
		"stripe delivery accepted": {
			status:     200,
			header:     map[string]string{"Stripe-Signature": "t=1,v1=abc", "X-Request-Id": "req_9"},
			ctx:        func(ctx context.Context) context.Context { return WithEventID(ctx, "evt_1") },
			wantResult: ResultOK, wantEvent: "evt_1", wantCorr: "req_9",
		},
		"standard webhook rejected": {
			status:     400,
			header:     map[string]string{"Webhook-Signature": "v1,abc", "Webhook-Id": "msg_1", "X-Correlation-Id": "c1"},
			ctx:        func(ctx context.Context) context.Context { return ctx },
			wantResult: ResultRejected, wantEvent: "msg_1", wantCorr: "c1",
		},
		"context wins over headers": {
			status:     503,
			header:     map[string]string{"Webhook-Id": "msg_1", "X-Request-Id": "req_9"},
			ctx:        func(ctx context.Context) context.Context { return WithCorrelationID(WithEventID(ctx, "evt_2"), "corr") },
			wantResult: ResultServerError, wantEvent: "evt_2", wantCorr: "corr",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
			r := httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body))
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			r = r.WithContext(tc.ctx(WithPaymentID(r.Context(), "pay_1")))
			a := FromRequest(r, body, tc.status)
			if a.Direction != Inbound || a.Method != "POST" || a.Path != "/webhooks/stripe" || a.Status != tc.status {
				t.Errorf("attempt %+v", a)
			}
			if a.Result != tc.wantResult || a.EventID != tc.wantEvent || a.CorrelationID != tc.wantCorr || a.PaymentID != "pay_1" {
				t.Errorf("outcome %q event %q corr %q payment %q", a.Result, a.EventID, a.CorrelationID, a.PaymentID)
			}
			if a.RequestBody != string(body) || a.RequestBytes != len(body) {
				t.Errorf("body %q", a.RequestBody)
			}
			for _, h := range []string{"Stripe-Signature", "Webhook-Signature"} {
				if v, ok := a.RequestHeader[h]; ok && v != redact.Redacted {
					t.Errorf("%s kept %q", h, v)
				}
			}
		})
	}
	big := bytes.Repeat([]byte("x"), DefaultCaptureLimit+1)
	a := FromRequest(httptest.NewRequest("POST", "/webhooks/stripe", nil), big, 413)
	if len(a.RequestBody) != DefaultCaptureLimit || !a.RequestTruncated || a.RequestBytes != len(big) {
		t.Errorf("big body: %d kept, truncated %v", len(a.RequestBody), a.RequestTruncated)
	}
}
