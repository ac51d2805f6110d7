package idempotency

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/store"
)

// Header names of the IETF Idempotency-Key draft and of Stripe's replay marker.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// MiddlewareConfig configures Middleware.
type MiddlewareConfig struct {
	// Scope names the caller of a request (an authorizer principal); keys never collide
	// across scopes.
	Scope func(*http.Request) string
	// MaxBody caps the request body (default 64 KiB); a larger body gets 413.
	MaxBody int64
}

type stagedKey struct{}

type staged struct {
	effects  []store.Write
	ifNewer  []store.Write
	notFinal bool
	pending  bool
	lease    *Lease
}

// Stage adds writes to commit atomically with the response of the request ctx belongs to. It
// reports false outside Middleware, where nothing would commit them.
func Stage(ctx context.Context, ws ...store.Write) bool {
	s, ok := ctx.Value(stagedKey{}).(*staged)
	if ok {
		s.effects = append(s.effects, ws...)
	}
	return ok
}

// StageIfNewer adds version-guarded writes (store.VersionBelow) to commit with the response
// unless the store already holds a newer version of their item; see Result.IfNewer.
func StageIfNewer(ctx context.Context, ws ...store.Write) bool {
	s, ok := ctx.Value(stagedKey{}).(*staged)
	if ok {
		s.ifNewer = append(s.ifNewer, ws...)
	}
	return ok
}

// NotFinal marks the response of the request ctx belongs to as not to be replayed: the key is
// released after the staged writes commit, so a retry runs again. Use it for an unknown
// outcome.
func NotFinal(ctx context.Context) {
	if s, ok := ctx.Value(stagedKey{}).(*staged); ok {
		s.notFinal = true
	}
}

// MarkPending marks the response of the request ctx belongs to as the interim answer of an
// unknown outcome: the key keeps the request and this response (Keeper.Pend), so a repeat gets
// it replayed and resumes the operation, and a different body gets 422.
func MarkPending(ctx context.Context) {
	if s, ok := ctx.Value(stagedKey{}).(*staged); ok {
		s.pending = true
	}
}

// LeaseOf returns the lease the request ctx belongs to runs under, inside Middleware: its
// FirstTried says when the key's operation first ran (earlier than now for a resumed pending
// key).
func LeaseOf(ctx context.Context) (*Lease, bool) {
	s, ok := ctx.Value(stagedKey{}).(*staged)
	if !ok || s.lease == nil {
		return nil, false
	}
	return s.lease, true
}

// Middleware makes an HTTP handler idempotent by the Idempotency-Key header, with the semantics
// of the IETF draft and Stripe: missing or malformed key 400, a different body under the same
// key 422 naming the fields, a concurrent duplicate 409 with Retry-After, a completed duplicate
// the stored status, headers and body with Idempotent-Replayed: true. Responses with a 5xx
// status are not stored, and neither are those the handler marks NotFinal. A response the
// handler marks MarkPending is stored as the interim answer of a pending key: a repeat gets it
// (Idempotent-Replayed: true) after the handler ran once more from the stored request, or
// the final answer once that resolved it.
func (k *Keeper) Middleware(cfg MiddlewareConfig) func(http.Handler) http.Handler {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.Scope == nil {
		cfg.Scope = func(*http.Request) string { return "local" }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, body, ok := ReadRequest(w, r, cfg.MaxBody)
			if !ok {
				return
			}
			fp, err := FingerprintJSON(body)
			if err != nil {
				fp = FingerprintBytes(body)
			}
			// A thin user of the typed API: the result is the recorded Response, stored as it is.
			resp, out, err := doTyped(r.Context(), k, cfg.Scope(r), key, fp, func(ctx context.Context) (Response, error) {
				rec := &recorder{header: http.Header{}, status: http.StatusOK}
				req := r.WithContext(ctx)
				// A resumed pending key runs from the bytes its first request sent.
				run := body
				if l, _ := LeaseOf(ctx); l != nil && l.Request != nil {
					run = l.Request
				}
				req.Body = io.NopCloser(bytes.NewReader(run))
				next.ServeHTTP(rec, req)
				if st, _ := ctx.Value(stagedKey{}).(*staged); rec.status >= 500 && !st.pending {
					NotFinal(ctx) // a server error may be retried: never replayed (unless pending)
				}
				return rec.response(), nil
			}, identity, deref, body)
			if err == nil {
				out.Response = &resp
			}
			if errors.Is(err, ErrInProgress) || errors.Is(err, ErrMismatch) {
				err = nil // answered by the outcome's Kind
			}
			k.WriteOutcome(w, r, out, err)
		})
	}
}

// ReadRequest reads what every idempotent HTTP request carries, the Idempotency-Key header and
// a body of at most maxBody bytes. When either is unusable it answers the problem (400, or 413
// for a body too large) and reports false.
func ReadRequest(w http.ResponseWriter, r *http.Request, maxBody int64) (key string, body []byte, ok bool) {
	if n := len(r.Header.Values(HeaderKey)); n > 1 {
		// Which one would count is a guess: refuse rather than use the first silently.
		problem.Write(w, problem.Typed(http.StatusBadRequest, problem.KeyInvalid, "Send one Idempotency-Key header; this request has "+strconv.Itoa(n)+"."))
		return "", nil, false
	}
	key = r.Header.Get(HeaderKey)
	if err := ValidateKey(key); err != nil {
		if errors.Is(err, ErrKeyMissing) {
			problem.Write(w, problem.Typed(http.StatusBadRequest, problem.KeyMissing, "This request needs an Idempotency-Key header."))
		} else {
			problem.Write(w, problem.Typed(http.StatusBadRequest, problem.KeyInvalid, "The Idempotency-Key header must be 1-255 visible ASCII characters."))
		}
		return "", nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			problem.Write(w, problem.Typed(http.StatusRequestEntityTooLarge, problem.BodyTooLarge, "The request body is larger than "+strconv.FormatInt(maxBody, 10)+" bytes."))
		} else {
			problem.Write(w, problem.Typed(http.StatusBadRequest, problem.MalformedRequest, "The request body could not be read."))
		}
		return "", nil, false
	}
	return key, body, true
}

// WriteOutcome answers an idempotent HTTP request from what Run (or Do) returned: the one
// mapping of a key's outcomes to HTTP. New writes the operation's response; Replay and Pending
// the stored one with Idempotent-Replayed: true; InProgress 409 with Retry-After; Mismatch 422
// naming the fields; a lost lease 409; any other error 500, logged, and never its text.
func (k *Keeper) WriteOutcome(w http.ResponseWriter, r *http.Request, out Outcome, err error) {
	switch {
	case errors.Is(err, ErrLeaseLost):
		w.Header().Set("Retry-After", "1")
		problem.Write(w, problem.Typed(http.StatusConflict, problem.KeyInProgress, "Another request with this Idempotency-Key took over; retry to get its result."))
		return
	case err != nil:
		k.log().ErrorContext(r.Context(), "idempotent request", "error", err)
		problem.Write(w, problem.Typed(http.StatusInternalServerError, problem.Internal, "The request could not be recorded; it is safe to retry with the same Idempotency-Key."))
		return
	}
	switch out.Kind {
	case New:
		writeResponse(w, *out.Response, false)
	case Replay, Pending:
		writeResponse(w, *out.Response, true)
	case InProgress:
		w.Header().Set("Retry-After", strconv.Itoa(int(out.RetryAfter.Seconds()+0.999)))
		problem.Write(w, problem.Typed(http.StatusConflict, problem.KeyInProgress, "A request with this Idempotency-Key is still being processed."))
	case Mismatch:
		problem.Write(w, problem.Typed(http.StatusUnprocessableEntity, problem.KeyReused, "This Idempotency-Key was used with a different request body.").WithFields(out.Fields))
	}
}

func identity(r Response) (Response, error) { return r, nil }

func deref(r *Response) (Response, error) { return *r, nil }

func writeResponse(w http.ResponseWriter, resp Response, replayed bool) {
	h := w.Header()
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		h.Set(k, resp.Header[k])
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// recorder captures a handler's response for storing.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// response keeps the headers that describe the body; Date and Content-Length are set anew.
func (r *recorder) response() Response {
	h := make(map[string]string, len(r.header))
	for k, v := range r.header {
		if k == "Date" || k == "Content-Length" || len(v) == 0 {
			continue
		}
		h[k] = v[0]
	}
	return Response{Status: r.status, Header: h, Body: bytes.Clone(r.body.Bytes())}
}
