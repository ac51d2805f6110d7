package stripeprovider

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Call and Observer are provider.Call and provider.Observer: the attempt log observes the
// adapter's exchanges without linking stripe-go.
type (
	Call     = provider.Call
	Observer = provider.Observer
)

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
