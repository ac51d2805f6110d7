package attempts

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

// API records every request to an API handler and its answer as an inbound attempt, so a
// payment's timeline starts with what the caller asked and what we said.
type API struct {
	// Record stores the attempt (build it with BestEffort). Required.
	Record RecordFunc
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Filing is what an API attempt is filed under. The wiring names it before it calls Serve, and
// hands it over as values: recording an answer never calls back into the handler's packages.
type Filing struct {
	// Operation names the handler's call ("payments.create").
	Operation string
	// Scope is the caller's scope, as the handler scopes keys.
	Scope string
	// PaymentID names the payment the request concerns: for a create, the id its scope and
	// Idempotency-Key derive; for a read, the id in its path. "" files it under no payment.
	PaymentID string
}

// Serve serves r with next and records the request and the answer under f.
func (a API) Serve(w http.ResponseWriter, r *http.Request, f Filing, next http.Handler) {
	now := a.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, DefaultCaptureLimit+1))
		// Hand the handler the whole body: what was read, then the rest unread.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		if err == nil {
			body = b
		}
	}
	rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
	next.ServeHTTP(rw, r)
	at := FromRequest(r, body, rw.status)
	at.Provider = "api"
	at.StartedAt, at.Duration = start, now().Sub(start)
	if len(body) > DefaultCaptureLimit {
		at.RequestBody, at.RequestTruncated = string(body[:DefaultCaptureLimit]), true
	}
	at.ResponseHeader = redact.Header(rw.Header())
	at.ResponseBody, at.ResponseBytes, at.ResponseTruncated = rw.body.snapshot()
	at.Operation, at.Scope, at.PaymentID = f.Operation, f.Scope, f.PaymentID
	if a.Record != nil {
		a.Record(r.Context(), at)
	}
}

// recordingWriter copies a response aside (up to DefaultCaptureLimit) as it is written.
type recordingWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   capture
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.wrote = true
	if w.body.limit == 0 {
		w.body.limit = DefaultCaptureLimit
	}
	w.body.write(p)
	return w.ResponseWriter.Write(p)
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
