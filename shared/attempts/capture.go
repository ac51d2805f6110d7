package attempts

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

type ctxKey int

const (
	paymentIDKey ctxKey = iota
	correlationIDKey
	eventIDKey
	operationKey
)

// WithPaymentID returns ctx carrying the payment id that attempts made under it are filed by.
func WithPaymentID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, paymentIDKey, id)
}

// WithCorrelationID returns ctx carrying the correlation id (request id, execution name) that
// ties attempts to the log lines around them.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationIDKey, id)
}

// WithEventID returns ctx carrying the provider event id an attempt belongs to.
func WithEventID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, eventIDKey, id)
}

// WithOperation returns ctx carrying the operation name ("payment_intents.create") that
// Transport records, so a provider adapter can name its calls.
func WithOperation(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, operationKey, op)
}

func ctxString(ctx context.Context, k ctxKey) string {
	s, _ := ctx.Value(k).(string)
	return s
}

// PaymentIDFrom returns the payment id set by WithPaymentID, or "".
func PaymentIDFrom(ctx context.Context) string { return ctxString(ctx, paymentIDKey) }

// CorrelationIDFrom returns the correlation id set by WithCorrelationID, or "".
func CorrelationIDFrom(ctx context.Context) string { return ctxString(ctx, correlationIDKey) }

// EventIDFrom returns the event id set by WithEventID, or "".
func EventIDFrom(ctx context.Context) string { return ctxString(ctx, eventIDKey) }

// OperationFrom returns the operation set by WithOperation, or "".
func OperationFrom(ctx context.Context) string { return ctxString(ctx, operationKey) }

// DefaultCaptureLimit is how much of each body the capture helpers keep before redaction. It is
// well above the stored cap so that redaction sees whole documents; a body beyond it is marked
// truncated and redacted by pattern.
const DefaultCaptureLimit = 64 << 10

// Transport is an http.RoundTripper that records every call it makes as an outbound Attempt.
// Put it under the provider's HTTP client (stripe-go's HTTPClient).
//
// It does not hold back the response: the body is handed to the caller as it arrives and
// copied aside up to CaptureLimit, and the attempt is recorded when the caller reads the body
// to its end or closes it (a call that fails is recorded at once). Recording uses the
// request's context without its cancellation, so a call that timed out is still logged.
type Transport struct {
	// Base makes the calls (default http.DefaultTransport).
	Base http.RoundTripper
	// Record stores the attempt; build it with BestEffort so a failure to record is logged and
	// never reaches the caller. Required.
	Record RecordFunc
	// Provider names the provider ("stripe").
	Provider string
	// Operation names a call; the default is the context's WithOperation value, else
	// "METHOD /path".
	Operation func(*http.Request) string
	// Result classifies a call; the default maps 2xx to ok, 402 to declined, 429 to
	// rate_limited, other 4xx to rejected, 5xx to server_error, a timeout to timeout and any
	// other error to error.
	Result func(status int, err error) string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CaptureLimit is how much of each body is kept (default DefaultCaptureLimit).
	CaptureLimit int
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	now := t.Now
	if now == nil {
		now = time.Now
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	limit := t.CaptureLimit
	if limit <= 0 {
		limit = DefaultCaptureLimit
	}
	ctx := req.Context()
	a := Attempt{
		Direction:      Outbound,
		Provider:       t.Provider,
		Operation:      t.operation(req),
		Method:         req.Method,
		Path:           req.URL.RequestURI(),
		RequestHeader:  redact.Header(req.Header),
		IdempotencyKey: req.Header.Get("Idempotency-Key"),
		PaymentID:      PaymentIDFrom(ctx),
		EventID:        EventIDFrom(ctx),
		CorrelationID:  CorrelationIDFrom(ctx),
	}
	var reqBody *capture
	if req.Body != nil && req.Body != http.NoBody {
		// A RoundTripper must not modify the caller's request: tee through a shallow copy.
		reqBody = &capture{limit: limit}
		r2 := new(http.Request)
		*r2 = *req
		r2.Body = &teeBody{rc: req.Body, c: reqBody}
		req = r2
	}
	a.StartedAt = now()
	resp, err := base.RoundTrip(req)
	a.Duration = now().Sub(a.StartedAt)
	if reqBody != nil {
		a.RequestBody, a.RequestBytes, a.RequestTruncated = reqBody.snapshot()
	}
	rctx := context.WithoutCancel(ctx)
	record := t.Record
	if record == nil {
		record = func(context.Context, Attempt) {}
	}
	if err != nil {
		a.Err = err.Error()
		a.Result = t.result(0, err)
		record(rctx, a)
		return nil, err
	}
	a.Status = resp.StatusCode
	a.ResponseHeader = redact.Header(resp.Header)
	a.Result = t.result(resp.StatusCode, nil)
	if resp.Body == nil || resp.Body == http.NoBody {
		record(rctx, a)
		return resp, nil
	}
	resp.Body = &recordingBody{rc: resp.Body, c: &capture{limit: limit}, finish: func(c *capture, readErr error) {
		a.ResponseBody, a.ResponseBytes, a.ResponseTruncated = c.snapshot()
		if readErr != nil {
			a.Err = "reading response body: " + readErr.Error()
		}
		record(rctx, a)
	}}
	return resp, nil
}

func (t *Transport) operation(req *http.Request) string {
	if t.Operation != nil {
		return t.Operation(req)
	}
	if op := OperationFrom(req.Context()); op != "" {
		return op
	}
	return req.Method + " " + req.URL.Path
}

func (t *Transport) result(status int, err error) string {
	if t.Result != nil {
		return t.Result(status, err)
	}
	return resultFor(status, err, isTimeout(err))
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// capture keeps the first limit bytes written to it and counts the rest. The transport may
// still be writing a request body while the response is read, hence the lock.
type capture struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	total int
}

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += len(p)
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
}

func (c *capture) snapshot() (body string, total int, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf), c.total, c.total > len(c.buf)
}

// teeBody copies a request body aside as the transport reads it.
type teeBody struct {
	rc io.ReadCloser
	c  *capture
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.c.write(p[:n])
	return n, err
}

func (b *teeBody) Close() error { return b.rc.Close() }

// recordingBody hands a response body to the caller unchanged, copying it aside, and calls
// finish once: at the end of the body, on a read error, or on Close, whichever comes first.
type recordingBody struct {
	rc     io.ReadCloser
	c      *capture
	once   sync.Once
	finish func(c *capture, readErr error)
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.c.write(p[:n])
	switch {
	case err == io.EOF:
		b.done(nil)
	case err != nil:
		b.done(err)
	}
	return n, err
}

func (b *recordingBody) Close() error {
	err := b.rc.Close()
	b.done(nil)
	return err
}

func (b *recordingBody) done(readErr error) {
	b.once.Do(func() { b.finish(b.c, readErr) })
}

// FromRequest builds the inbound Attempt for a request twice received and answered with status:
// method, path, headers (redacted), body (as given, up to DefaultCaptureLimit; Record redacts
// and caps it), the Idempotency-Key header, and the payment, event and correlation ids from the
// request's context. The event id falls back to the Standard Webhooks webhook-id header, the
// correlation id to X-Correlation-Id or X-Request-Id.
//
// The caller fills in what only it knows: Provider, Operation ("webhook stripe"), StartedAt and
// Duration, the response, and a Result more precise than the status gives
// (ResultRejectedSignature).
func FromRequest(r *http.Request, body []byte, status int) Attempt {
	ctx := r.Context()
	a := Attempt{
		Direction:      Inbound,
		Method:         r.Method,
		Path:           r.URL.RequestURI(),
		RequestHeader:  redact.Header(r.Header),
		RequestBytes:   len(body),
		Status:         status,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		PaymentID:      PaymentIDFrom(ctx),
		EventID:        EventIDFrom(ctx),
		CorrelationID:  CorrelationIDFrom(ctx),
		Result:         resultFor(status, nil, false),
	}
	a.RequestBody, a.RequestTruncated = string(body), false
	if len(body) > DefaultCaptureLimit {
		a.RequestBody, a.RequestTruncated = string(body[:DefaultCaptureLimit]), true
	}
	if a.EventID == "" {
		a.EventID = r.Header.Get("Webhook-Id")
	}
	if a.CorrelationID == "" {
		a.CorrelationID = r.Header.Get("X-Correlation-Id")
	}
	if a.CorrelationID == "" {
		a.CorrelationID = r.Header.Get("X-Request-Id")
	}
	return a
}
