package stripeprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

var testNow = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func newTestClient(t *testing.T, base string, rec *recorder, timeout time.Duration) *Client {
	t.Helper()
	var obs Observer
	if rec != nil {
		obs = rec
	}
	c, err := New(Client{APIKey: "sk_test_secret", BaseURL: base, Observer: obs, Timeout: timeout,
		Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_test")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// A card_error as Stripe sends it: the error object carries the codes (including the advice and
// network fields stripe-go v82 does not model) and the PaymentIntent it declined.
const declineBody = `{"error": {
  "type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
  "advice_code": "try_again_later", "network_advice_code": "24", "network_decline_code": "51",
  "message": "Your card has insufficient funds.",
  "payment_method": {"id": "pm_1", "object": "payment_method", "type": "card", "card": {"brand": "mastercard"}},
  "payment_intent": {"id": "pi_declined", "object": "payment_intent", "status": "requires_payment_method",
    "amount": 1999, "currency": "usd", "customer": "cus_1", "created": 1790000000,
    "metadata": {"invoice": "in_1"},
    "last_payment_error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}}
}}`

const expiredBody = `{"error": {"type": "card_error", "code": "expired_card", "message": "Your card has expired.",
  "payment_intent": {"id": "pi_exp", "object": "payment_intent", "status": "requires_payment_method", "amount": 500, "currency": "eur",
    "last_payment_error": {"type": "card_error", "code": "expired_card"}}}}`

const succeededBody = `{"id": "pi_ok", "object": "payment_intent", "status": "succeeded", "amount": 1999,
  "currency": "usd", "customer": "cus_1", "payment_method": "pm_card_visa", "created": 1790000000,
  "description": "order 1", "metadata": {"invoice": "in_1"}}`

func TestCreateOutcomes(t *testing.T) {
	key := provider.IdempotencyKey("local", "k1")
	tests := map[string]struct {
		handler http.HandlerFunc
		timeout time.Duration
		check   func(t *testing.T, p provider.Payment, err error)
	}{
		"succeeded": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Idempotent-Replayed", "true")
				writeJSON(w, 200, succeededBody)
			},
			check: func(t *testing.T, p provider.Payment, err error) {
				want := provider.Payment{ID: "pi_ok", Status: provider.StatusSucceeded, Amount: 1999, Currency: "usd",
					Customer: "cus_1", PaymentMethod: "pm_card_visa", Description: "order 1",
					Created: time.Unix(1790000000, 0).UTC(), Metadata: map[string]string{"invoice": "in_1"}}
				if err != nil || fmt.Sprint(p) != fmt.Sprint(want) {
					t.Fatalf("got %+v, %v; want %+v", p, err, want)
				}
			},
		},
		"402 card decline carries the payment and every code": {
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 402, declineBody) },
			check: func(t *testing.T, p provider.Payment, err error) {
				var de *provider.DeclineError
				if !errors.As(err, &de) {
					t.Fatalf("err = %v, want *DeclineError", err)
				}
				want := provider.Decline{Code: "insufficient_funds", ErrorCode: "card_declined", AdviceCode: "try_again_later",
					NetworkAdviceCode: "24", NetworkDeclineCode: "51", Network: "mastercard", Message: "Your card has insufficient funds."}
				if de.Payment.Decline == nil || *de.Payment.Decline != want {
					t.Fatalf("decline = %+v, want %+v", de.Payment.Decline, want)
				}
				if de.Payment.ID != "pi_declined" || de.Payment.Status != provider.StatusDeclined || de.Payment.Amount != 1999 ||
					de.Payment.Customer != "cus_1" || de.Payment.PaymentMethod != "pm_1" {
					t.Fatalf("payment = %+v", de.Payment)
				}
				if p.ID != de.Payment.ID {
					t.Fatalf("returned payment %q differs from the error's %q", p.ID, de.Payment.ID)
				}
			},
		},
		"402 expired card without decline_code uses the error code": {
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 402, expiredBody) },
			check: func(t *testing.T, p provider.Payment, err error) {
				var de *provider.DeclineError
				if !errors.As(err, &de) || de.Payment.Decline.Code != "expired_card" || de.Payment.ID != "pi_exp" {
					t.Fatalf("got %+v, %v", p, err)
				}
			},
		},
		"429 with delta-seconds Retry-After": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3")
				writeJSON(w, 429, `{"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "Too many requests"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var te *provider.ThrottledError
				if !errors.As(err, &te) || te.RetryAfter != 3*time.Second {
					t.Fatalf("err = %v, want throttled 3s", err)
				}
			},
		},
		"429 with HTTP-date Retry-After": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", testNow.Add(90*time.Second).Format(http.TimeFormat))
				writeJSON(w, 429, `{"error": {"type": "invalid_request_error", "code": "rate_limit"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var te *provider.ThrottledError
				if !errors.As(err, &te) || te.RetryAfter != 90*time.Second {
					t.Fatalf("err = %v, want throttled 90s", err)
				}
			},
		},
		"500 on a create is an unknown outcome": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 500, `{"error": {"type": "api_error", "message": "An unknown error occurred"}}`)
			},
			check: wantUnknown(key, 500),
		},
		"502 html from a proxy is still classified by status": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(502)
				io.WriteString(w, "<html>bad gateway</html>")
			},
			check: wantUnknown(key, 502),
		},
		"409 key in flight is an unknown outcome": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 409, `{"error": {"type": "idempotency_error", "message": "There is currently another in-progress request using this Idempotent Key"}}`)
			},
			check: wantUnknown(key, 409),
		},
		"hang past the client timeout is an unknown outcome": {
			timeout: 100 * time.Millisecond,
			handler: func(w http.ResponseWriter, r *http.Request) {
				// The server notices the client hanging up only once the body is consumed.
				io.Copy(io.Discard, r.Body)
				<-r.Context().Done()
			},
			check: wantUnknown(key, 0),
		},
		"connection reset after the request is an unknown outcome": {
			handler: resetConnection,
			check:   wantUnknown(key, 0),
		},
		"400 idempotency_error is permanent": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 400, `{"error": {"type": "idempotency_error", "message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var pe *provider.PermanentError
				if !errors.As(err, &pe) || pe.StatusCode != 400 || !errors.Is(err, provider.ErrIdempotencyMismatch) {
					t.Fatalf("err = %v, want permanent idempotency mismatch", err)
				}
			},
		},
		"400 invalid request is permanent with its code": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 400, `{"error": {"type": "invalid_request_error", "code": "parameter_invalid_integer", "param": "amount"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var pe *provider.PermanentError
				if !errors.As(err, &pe) || pe.Code != "parameter_invalid_integer" || errors.Is(err, provider.ErrIdempotencyMismatch) {
					t.Fatalf("err = %v", err)
				}
			},
		},
		"401 is a credentials error": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 401, `{"error": {"type": "invalid_request_error", "message": "Invalid API Key provided: sk_test_****cret"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var ce *provider.CredentialsError
				if !errors.As(err, &ce) || ce.StatusCode != 401 {
					t.Fatalf("err = %v, want credentials", err)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			rec := &recorder{}
			c := newTestClient(t, srv.URL, rec, tc.timeout)
			p, err := c.Create(context.Background(), provider.CreateRequest{Amount: 1999, Currency: "usd",
				Customer: "cus_1", PaymentMethod: "pm_card_visa", IdempotencyKey: key})
			tc.check(t, p, err)
			calls := rec.all()
			if len(calls) != 1 {
				t.Fatalf("observed %d calls, want exactly 1 (stripe-go retries must be off)", len(calls))
			}
			if calls[0].Replayed != (name == "succeeded") {
				t.Fatalf("Replayed = %v", calls[0].Replayed)
			}
			if calls[0].IdempotencyKey != key || calls[0].Method != http.MethodPost || len(calls[0].RequestBody) == 0 {
				t.Fatalf("observed call = %+v", calls[0])
			}
			if strings.Contains(fmt.Sprintf("%+v", calls[0]), "sk_test_secret") {
				t.Fatal("the API key reached the observer")
			}
		})
	}
}

func wantUnknown(key string, status int) func(t *testing.T, p provider.Payment, err error) {
	return func(t *testing.T, _ provider.Payment, err error) {
		t.Helper()
		var ue *provider.UnknownOutcomeError
		if !errors.As(err, &ue) || ue.IdempotencyKey != key || ue.StatusCode != status {
			t.Fatalf("err = %v, want unknown outcome with the key and status %d", err, status)
		}
	}
}

// resetConnection reads the request, then closes the TCP connection with RST.
func resetConnection(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

func TestGetOutcomes(t *testing.T) {
	tests := map[string]struct {
		handler http.HandlerFunc
		check   func(t *testing.T, p provider.Payment, err error)
	}{
		"declined payment is state, not an error": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, `{"id": "pi_1", "object": "payment_intent", "status": "requires_payment_method", "amount": 10, "currency": "usd",
  "last_payment_error": {"type": "card_error", "code": "card_declined", "decline_code": "do_not_honor", "advice_code": "do_not_try_again",
    "network_advice_code": "03", "network_decline_code": "05", "payment_method": {"id": "pm_2", "card": {"brand": "visa"}}}}`)
			},
			check: func(t *testing.T, p provider.Payment, err error) {
				want := provider.Decline{Code: "do_not_honor", ErrorCode: "card_declined", AdviceCode: "do_not_try_again",
					NetworkAdviceCode: "03", NetworkDeclineCode: "05", Network: "visa"}
				if err != nil || p.Status != provider.StatusDeclined || p.Decline == nil || *p.Decline != want || p.PaymentMethod != "pm_2" {
					t.Fatalf("got %+v (decline %+v), %v", p, p.Decline, err)
				}
			},
		},
		"404 matches ErrNotFound": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 404, `{"error": {"type": "invalid_request_error", "code": "resource_missing", "param": "intent"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				if !errors.Is(err, provider.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			},
		},
		"503 on a read is transient": {
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 503, `{"error": {"type": "api_error"}}`) },
			check: func(t *testing.T, _ provider.Payment, err error) {
				var te *provider.TransientError
				if !errors.As(err, &te) || te.StatusCode != 503 {
					t.Fatalf("err = %v, want transient 503", err)
				}
			},
		},
		"403 is a credentials error": {
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 403, `{"error": {"type": "invalid_request_error"}}`)
			},
			check: func(t *testing.T, _ provider.Payment, err error) {
				var ce *provider.CredentialsError
				if !errors.As(err, &ce) || ce.StatusCode != 403 {
					t.Fatalf("err = %v", err)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			p, err := newTestClient(t, srv.URL, nil, 0).Get(context.Background(), "pi_1")
			tc.check(t, p, err)
		})
	}
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing listens there now
	_, err := newTestClient(t, base, nil, 0).Create(context.Background(),
		provider.CreateRequest{Amount: 1, Currency: "usd", IdempotencyKey: "k"})
	var te *provider.TransientError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want transient: the request never left", err)
	}
}

func TestWritesNeedAKey(t *testing.T) {
	c := newTestClient(t, "http://127.0.0.1:1", nil, 0)
	if _, err := c.Create(context.Background(), provider.CreateRequest{Amount: 1, Currency: "usd"}); !errors.Is(err, provider.ErrMissingIdempotencyKey) {
		t.Fatalf("create without key: %v", err)
	}
	if _, err := c.Confirm(context.Background(), provider.ConfirmRequest{ID: "pi_1"}); !errors.Is(err, provider.ErrMissingIdempotencyKey) {
		t.Fatalf("confirm without key: %v", err)
	}
	if _, err := New(Client{}); !errors.Is(err, ErrNoAPIKey) {
		t.Fatalf("New without key: %v", err)
	}
}

// fakeStripeList serves n PaymentIntents newest first with Stripe's pagination.
type fakeStripeList struct {
	mu      sync.Mutex
	n       int
	queries []string
}

func (f *fakeStripeList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	start := 0
	if after := q.Get("starting_after"); after != "" {
		i, _ := strconv.Atoi(strings.TrimPrefix(after, "pi_"))
		start = f.n - i + 1
	}
	var items []string
	for i := start; i < f.n && len(items) < limit; i++ {
		id := f.n - i // newest first: pi_n ... pi_1
		items = append(items, fmt.Sprintf(`{"id": "pi_%d", "object": "payment_intent", "status": "succeeded", "amount": %d, "currency": "usd", "created": %d}`,
			id, id*100, 1790000000+id))
	}
	more := start+len(items) < f.n
	writeJSON(w, 200, fmt.Sprintf(`{"object": "list", "url": "/v1/payment_intents", "has_more": %t, "data": [%s]}`, more, strings.Join(items, ",")))
}

func TestListPaginates(t *testing.T) {
	f := &fakeStripeList{n: 250}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := newTestClient(t, srv.URL, nil, 0)
	from := time.Unix(1790000000, 0)
	var got []string
	for p, err := range c.List(context.Background(), provider.ListParams{CreatedFrom: from, CreatedTo: from.Add(time.Hour), Customer: "cus_9"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.ID)
	}
	if len(got) != 250 || got[0] != "pi_250" || got[249] != "pi_1" {
		t.Fatalf("listed %d payments (%v ... %v), want pi_250 .. pi_1", len(got), got[:1], got[len(got)-1:])
	}
	if len(f.queries) != 3 {
		t.Fatalf("pages fetched = %d, want 3 of 100", len(f.queries))
	}
	for _, q := range f.queries {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"limit": "100", "customer": "cus_9", "created[gte]": "1790000000", "created[lte]": "1790003600"}
		for k, w := range want {
			if v.Get(k) != w {
				t.Errorf("query %q: %s = %q, want %q", q, k, v.Get(k), w)
			}
		}
	}
	if !strings.Contains(f.queries[1], "starting_after=pi_151") {
		t.Fatalf("second page query %q does not start after the first page", f.queries[1])
	}
}

func TestListWithOnlyALowerBoundSendsNoUpperBound(t *testing.T) {
	f := &fakeStripeList{n: 1}
	srv := httptest.NewServer(f)
	defer srv.Close()
	for _, err := range newTestClient(t, srv.URL, nil, 0).List(context.Background(), provider.ListParams{CreatedFrom: time.Unix(5, 0)}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := url.ParseQuery(f.queries[0]); v.Has("created[lte]") || v.Get("created[gte]") != "5" {
		t.Fatalf("query = %q", f.queries[0])
	}
}
