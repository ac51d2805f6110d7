package attempts

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

// API records each request to an API handler and its answer as an inbound attempt, so a
// payment's timeline starts with what the caller asked and what we said. The handler that
// writes the answer begins the exchange and, once it has answered, files it: the log is told
// what happened, and calls nothing back.
type API struct {
	// Record stores the attempt (build it with BestEffort). Required.
	Record RecordFunc
	// Replays, if set, stores an exchange whose answer was a replay (Idempotent-Replayed:
	// true) instead of Record: a Background's Record, so a replay's answer does not wait for
	// its own row to commit. nil: Record.
	Replays RecordFunc
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Begin starts recording r. It reads the start of the body aside (the handler still reads the
// whole of it) and returns the writer the answer must be written to, and the func that files
// the exchange, once answered, under the handler's operation ("payments.create"), the caller's
// scope and the payment it concerns ("" for none).
func (a API) Begin(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func(operation, scope, paymentID string)) {
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
	return rw, func(operation, scope, paymentID string) {
		at := FromRequest(r, body, rw.status)
		at.Provider = "api"
		at.StartedAt, at.Duration = start, now().Sub(start)
		at.ResponseHeader = redact.Header(rw.Header())
		at.ResponseBody, at.ResponseBytes, at.ResponseTruncated = rw.body.snapshot()
		at.Operation, at.Scope, at.PaymentID = operation, scope, paymentID
		record := a.Record
		if a.Replays != nil && at.IsReplay() {
			record = a.Replays
		}
		if record != nil {
			record(r.Context(), at)
		}
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
