package attempts

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestExchange: the handler gets the whole body, the caller the handler's answer, and the
// attempt both, filed under what the handler named.
func TestExchange(t *testing.T) {
	var c collector
	api := API{Record: c.record, Now: tick(time.Millisecond)}
	f := struct{ Operation, Scope, PaymentID string }{"payments.create", "local", "pay_1"}
	big := strings.Repeat("x", DefaultCaptureLimit+10)
	for name, body := range map[string]string{"small": `{"amount":1000}`, "over the capture limit": big} {
		t.Run(name, func(t *testing.T) {
			c = collector{}
			var seen string
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen = string(b)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Set-Cookie", "sid=1")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":"pay_1"}`)
			})
			r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
			r.Header.Set("Idempotency-Key", "k-1")
			w := httptest.NewRecorder()
			rw, file := api.Begin(w, r)
			next.ServeHTTP(rw, r)
			file(f.Operation, f.Scope, f.PaymentID)
			if seen != body || w.Code != http.StatusCreated || w.Body.String() != `{"id":"pay_1"}` {
				t.Fatalf("handler saw %d bytes, caller got %d %s", len(seen), w.Code, w.Body)
			}
			got := c.attempts()
			if len(got) != 1 {
				t.Fatalf("%d attempts", len(got))
			}
			a := got[0]
			if a.Operation != f.Operation || a.Scope != f.Scope || a.PaymentID != f.PaymentID || a.Provider != "api" ||
				a.Direction != Inbound || a.IdempotencyKey != "k-1" || a.Status != http.StatusCreated || a.Result != ResultOK {
				t.Errorf("attempt %+v", a)
			}
			if a.ResponseBody != `{"id":"pay_1"}` || a.ResponseHeader["Set-Cookie"] != "[redacted]" || a.Duration != time.Millisecond {
				t.Errorf("response %q headers %v duration %s", a.ResponseBody, a.ResponseHeader, a.Duration)
			}
			if truncated := len(body) > DefaultCaptureLimit; a.RequestTruncated != truncated || a.RequestBytes != min(len(body), DefaultCaptureLimit+1) {
				t.Errorf("request truncated %v, %d bytes", a.RequestTruncated, a.RequestBytes)
			}
		})
	}
}
