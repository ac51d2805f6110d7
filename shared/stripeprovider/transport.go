package stripeprovider

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// Call is one HTTP exchange with the provider, as the attempt log needs it. It never holds the
// API key: the Authorization header is not copied. Bodies are as sent and received; redaction
// and capping belong to the attempt log.
type Call struct {
	Method         string
	Path           string // URL path, e.g. /v1/payment_intents
	Query          string // raw query string (list filters, pagination)
	RequestBody    []byte // form-encoded body as sent; nil for GET
	IdempotencyKey string
	StatusCode     int    // 0 when no response arrived
	RequestID      string // the provider's Request-Id, for support tickets
	RetryAfter     string // the raw Retry-After header, when sent
	// Replayed: the provider answered from its idempotency cache (Idempotent-Replayed: true),
	// so this exchange had no new effect.
	Replayed     bool
	ResponseBody []byte
	Started      time.Time
	Duration     time.Duration
	Err          error // the transport error when no (complete) response arrived
}

// Observer receives every Call the adapter makes, after it ends. Observe runs on the request
// path: keep it fast and never let it fail the call.
type Observer interface {
	Observe(ctx context.Context, c Call)
}

// exchange carries the last response status and headers of an adapter operation back from the
// transport, for the cases where stripe-go returns an error that has lost them (an undecodable
// 5xx body).
type exchange struct {
	status int
	header http.Header
}

type exchangeKey struct{}

func withExchange(ctx context.Context) (context.Context, *exchange) {
	ex := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, ex), ex
}

// capture is the RoundTripper that records every exchange.
type capture struct {
	next     http.RoundTripper
	observer Observer
	now      func() time.Time
}

var _ http.RoundTripper = (*capture)(nil)

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	call := Call{
		Method:         req.Method,
		Path:           req.URL.Path,
		Query:          req.URL.RawQuery,
		IdempotencyKey: req.Header.Get("Idempotency-Key"),
		Started:        c.now(),
	}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		call.RequestBody = body
		// A RoundTripper must not modify the caller's request; send a shallow copy.
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}

	res, err := c.next.RoundTrip(req)
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex != nil {
		ex.status, ex.header = 0, nil
	}
	if err != nil {
		call.Err = err
		c.finish(req.Context(), call)
		return nil, err
	}

	call.StatusCode = res.StatusCode
	call.RequestID = res.Header.Get("Request-Id")
	call.RetryAfter = res.Header.Get("Retry-After")
	call.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
	if ex != nil {
		ex.status, ex.header = res.StatusCode, res.Header
	}
	body, rerr := io.ReadAll(res.Body)
	res.Body.Close()
	call.ResponseBody = body
	if rerr != nil {
		// The response started but broke off (a reset mid-body): hand stripe-go the same
		// failure after the bytes that did arrive.
		call.Err = rerr
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{rerr}))
	} else {
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.finish(req.Context(), call)
	return res, nil
}

func (c *capture) finish(ctx context.Context, call Call) {
	call.Duration = c.now().Sub(call.Started)
	if c.observer != nil {
		c.observer.Observe(ctx, call)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
