package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/signature"
)

var (
	now          = time.Unix(1767225600, 0)
	stripeSecret = "whsec_ingest_test_secret"
	stdSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("ingest-standard-secret-32-bytes!"))
	stripeBody   = []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","created":1767225600,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"succeeded"}}}`)
	atCap        = append(stripeBody[:len(stripeBody):len(stripeBody)], bytes.Repeat([]byte(" "), DefaultMaxBody-len(stripeBody))...)
	stdBody      = []byte(`{"type":"invoice.paid","timestamp":"2026-01-01T00:00:00Z","data":{"id":"inv_1"}}`)
)

type memQueue struct {
	mu  sync.Mutex
	got []webhooks.Delivery
	err error
}

func (q *memQueue) Enqueue(_ context.Context, d webhooks.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.got = append(q.got, d)
	return nil
}

type recorder struct{ got []Receipt }

func (r *recorder) Observe(_ context.Context, a Receipt) { r.got = append(r.got, a) }

type brokenVerifiers struct{}

func (brokenVerifiers) Verifier(context.Context, string) (webhooks.Verifier, error) {
	return nil, errors.New("ssm: throttled")
}

func testVerifiers(t testing.TB) webhooks.Static {
	clock := func() time.Time { return now }
	sv, err := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: []string{stripeSecret}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	stv, err := signature.NewStandardVerifier(signature.StandardVerifier{Secrets: []string{stdSecret}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return webhooks.Static{webhooks.ProviderStripe: sv, webhooks.ProviderStandard: stv}
}

func stripeHeader(body []byte, secret string, at time.Time) http.Header {
	h := http.Header{}
	h.Set(webhooks.StripeSignatureHeader, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header)
	return h
}

func standardHeader(t testing.TB, id string, body []byte, at time.Time) http.Header {
	wh, err := standardwebhooks.NewWebhook(stdSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := wh.Sign(id, at, body)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", fmt.Sprint(at.Unix()))
	h.Set("webhook-signature", sig)
	return h
}

type rig struct {
	mux   *http.ServeMux
	queue *memQueue
	obs   *recorder
	logs  *bytes.Buffer
}

func newRig(t testing.TB, v webhooks.Verifiers) *rig {
	r := &rig{mux: http.NewServeMux(), queue: &memQueue{}, obs: &recorder{}, logs: &bytes.Buffer{}}
	h := &Handler{Verifiers: v, Queue: r.queue}
	h.Observer = r.obs
	h.Log = slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.Now = func() time.Time { return now }
	r.mux.Handle(Pattern, h)
	return r
}

func (r *rig) post(path string, h http.Header, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	r.mux.ServeHTTP(w, req)
	return w
}

func TestHandler(t *testing.T) {
	tests := map[string]struct {
		verifiers webhooks.Verifiers
		queueErr  error
		path      string
		header    http.Header
		body      []byte
		status    int
		reason    error // what the observer is told; nil for 200
		enqueued  bool
	}{
		"stripe accepted":   {path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now), body: stripeBody, status: 200, enqueued: true},
		"standard accepted": {path: "/webhooks/standard", header: standardHeader(t, "msg_1", stdBody, now), body: stdBody, status: 200, enqueued: true},
		"body changed": {path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now), body: append([]byte(" "), stripeBody...),
			status: 400, reason: webhooks.ErrNoValidSignature},
		"wrong secret":   {path: "/webhooks/stripe", header: stripeHeader(stripeBody, "whsec_wrong", now), body: stripeBody, status: 400, reason: webhooks.ErrNoValidSignature},
		"stale":          {path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now.Add(-time.Hour)), body: stripeBody, status: 400, reason: webhooks.ErrTooOld},
		"future":         {path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now.Add(time.Hour)), body: stripeBody, status: 400, reason: webhooks.ErrTooNew},
		"missing header": {path: "/webhooks/stripe", header: http.Header{}, body: stripeBody, status: 400, reason: webhooks.ErrMissingHeader},
		"garbage header": {path: "/webhooks/stripe", header: http.Header{"Stripe-Signature": {"garbage"}}, body: stripeBody, status: 400, reason: webhooks.ErrBadHeader},
		"standard stale": {path: "/webhooks/standard", header: standardHeader(t, "msg_1", stdBody, now.Add(-time.Hour)), body: stdBody, status: 400, reason: webhooks.ErrTooOld},
		"unknown provider": {path: "/webhooks/paypal", header: stripeHeader(stripeBody, stripeSecret, now), body: stripeBody,
			status: 404, reason: webhooks.ErrUnknownProvider},
		"exactly at the cap": {path: "/webhooks/stripe", header: stripeHeader(atCap, stripeSecret, now), body: atCap, status: 200, enqueued: true},
		"over the cap": {path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now), body: bytes.Repeat([]byte("x"), DefaultMaxBody+1),
			status: 413, reason: webhooks.ErrTooLarge},
		"queue refuses": {queueErr: errors.New("sqs: 500"), path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now), body: stripeBody,
			status: 503},
		"secrets unavailable": {verifiers: brokenVerifiers{}, path: "/webhooks/stripe", header: stripeHeader(stripeBody, stripeSecret, now), body: stripeBody,
			status: 503},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := tc.verifiers
			if v == nil {
				v = testVerifiers(t)
			}
			r := newRig(t, v)
			r.queue.err = tc.queueErr
			w := r.post(tc.path, tc.header, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if got := len(r.queue.got) == 1; got != tc.enqueued {
				t.Fatalf("enqueued %d deliveries", len(r.queue.got))
			}
			if len(r.obs.got) != 1 {
				t.Fatalf("observer called %d times", len(r.obs.got))
			}
			a := r.obs.got[0]
			if a.Status != tc.status || (tc.reason != nil && !errors.Is(a.Err, tc.reason)) || (tc.status == 200) != (a.Err == nil) {
				t.Fatalf("attempt status %d err %v, want %d %v", a.Status, a.Err, tc.status, tc.reason)
			}
			for _, k := range []string{webhooks.StripeSignatureHeader, webhooks.StandardSignatureHeader} {
				if v := a.Header.Get(k); v != "" && v != "[redacted]" {
					t.Fatalf("observer saw %s = %q", k, v)
				}
			}
			if sig := tc.header.Get(webhooks.StripeSignatureHeader) + tc.header.Get(webhooks.StandardSignatureHeader); sig != "" {
				if strings.Contains(r.logs.String(), sig) {
					t.Fatal("the log holds the signature")
				}
			}
			for _, s := range []string{stripeSecret, strings.TrimPrefix(stdSecret, "whsec_")} {
				if strings.Contains(r.logs.String(), s) || strings.Contains(w.Body.String(), s) {
					t.Fatal("a secret leaked into a log or a response")
				}
			}
			if tc.status == 200 {
				if w.Body.String() != `{"received":true}` {
					t.Fatalf("200 body %q", w.Body)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
				t.Fatalf("content type %q", ct)
			}
			if tc.status == 503 && w.Header().Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		})
	}
}

// Every 400 looks the same from outside: which check failed is for the log only.
func TestRejectionsAreIndistinguishable(t *testing.T) {
	headers := []http.Header{
		{},
		{"Stripe-Signature": {"garbage"}},
		stripeHeader(stripeBody, "whsec_wrong", now),
		stripeHeader(stripeBody, stripeSecret, now.Add(-time.Hour)),
		stripeHeader(stripeBody, stripeSecret, now.Add(time.Hour)),
	}
	var bodies []string
	for _, h := range headers {
		w := newRig(t, testVerifiers(t)).post("/webhooks/stripe", h, stripeBody)
		bodies = append(bodies, w.Body.String())
	}
	if len(slices.Compact(slices.Clone(bodies))) != 1 {
		t.Fatalf("400 bodies differ: %q", bodies)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &p); err != nil || p["status"] != float64(400) {
		t.Fatalf("not a problem document: %s", bodies[0])
	}
}

func TestDeliveryCarriesNoSignature(t *testing.T) {
	r := newRig(t, testVerifiers(t))
	h := standardHeader(t, "msg_7", stdBody, now)
	h.Set("Authorization", "Bearer x")
	if w := r.post("/webhooks/standard", h, stdBody); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	d := r.queue.got[0]
	if d.EventID != "msg_7" || d.Provider != "standard" || !bytes.Equal(d.Body, stdBody) || !d.ReceivedAt.Equal(now) {
		t.Fatalf("delivery %+v", d)
	}
	for k := range d.Headers {
		if strings.EqualFold(k, webhooks.StandardSignatureHeader) || strings.EqualFold(k, "Authorization") {
			t.Fatalf("delivery carries %s", k)
		}
	}
	if got := r.obs.got[0].Header.Get("Authorization"); got != "[redacted]" {
		t.Fatalf("observer saw Authorization %q", got)
	}
}
