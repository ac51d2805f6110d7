package ingest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/webhooks"
)

type countQueue struct{ n int }

func (q *countQueue) Enqueue(context.Context, webhooks.Delivery) error { q.n++; return nil }

// BenchmarkHandler measures verify + enqueue in process for a Stripe delivery of a realistic
// size (a PaymentIntent event is 2-4 KiB), with JSON logging to io.Discard, and reports p99.
func BenchmarkHandler(b *testing.B) {
	q := &countQueue{}
	h := &Handler{Verifiers: testVerifiers(b), Queue: q}
	h.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	body := bytes.Replace(stripeBody, []byte(`"status":"succeeded"`),
		[]byte(`"status":"succeeded","description":"`+string(bytes.Repeat([]byte("x"), 3000))+`"`), 1)
	hdr := stripeHeader(body, stripeSecret, now)
	h.Now = func() time.Time { return now }
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(body))
		req.SetPathValue("provider", webhooks.ProviderStripe)
		req.Header = hdr
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(t0))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	if q.n != len(lat) {
		b.Fatalf("enqueued %d of %d", q.n, len(lat))
	}
}

// FuzzHandler sends arbitrary headers and bodies: no panic, and only 200/400/404/413.
func FuzzHandler(f *testing.F) {
	f.Add("stripe", webhooks.StripeSignatureHeader, stripeHeader(stripeBody, stripeSecret, now).Get(webhooks.StripeSignatureHeader), stripeBody)
	f.Add("standard", "webhook-signature", "v1,abc", stdBody)
	f.Add("standard", "webhook-timestamp", "1767225600", []byte("{}"))
	f.Add("paypal", "X", "y", []byte(nil))
	f.Add("stripe", "Stripe-Signature", "t=1,t=2,v1=00,v1==", bytes.Repeat([]byte("a"), 1025))
	v := testVerifiers(f)
	f.Fuzz(func(t *testing.T, provider, key, value string, body []byte) {
		h := &Handler{Verifiers: v, Queue: &countQueue{}}
		h.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
		h.MaxBody = 1024 // so the fuzzer reaches 413 cheaply
		req := httptest.NewRequest(http.MethodPost, "/webhooks/x", bytes.NewReader(body))
		req.SetPathValue("provider", provider)
		if key != "" {
			req.Header[key] = []string{value}
			req.Header.Set(key, value)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200, 400, 404, 413:
		default:
			t.Fatalf("status %d", w.Code)
		}
	})
}
