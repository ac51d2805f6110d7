package attempts

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

// Exchange is one request to an API handler being served, recorded as an inbound attempt so a
// payment's timeline starts with what the caller asked and what we said. The handler that
// writes the answer begins it and hands the attempt to the log when it has answered: the log
// is told what happened, and calls nothing back.
type Exchange struct {
	r     *http.Request
	start time.Time
	body  []byte
	w     *recordingWriter
}

// Begin starts recording r at now. It reads the start of the body aside (the handler still
// reads the whole of it) and returns the writer the answer must be written to.
func Begin(w http.ResponseWriter, r *http.Request, now time.Time) (*Exchange, http.ResponseWriter) {
	e := &Exchange{r: r, start: now, w: &recordingWriter{ResponseWriter: w, status: http.StatusOK}}
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, DefaultCaptureLimit+1))
		// Hand the handler the whole body: what was read, then the rest unread.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		if err == nil {
			e.body = b
		}
	}
	return e, e.w
}

// Attempt is the exchange as answered by now, filed under the handler's operation
// ("payments.create"), the caller's scope and the payment it concerns ("" for none).
func (e *Exchange) Attempt(operation, scope, paymentID string, now time.Time) Attempt {
	at := FromRequest(e.r, e.body, e.w.status)
	at.Provider = "api"
	at.StartedAt, at.Duration = e.start, now.Sub(e.start)
	at.ResponseHeader = redact.Header(e.w.Header())
	at.ResponseBody, at.ResponseBytes, at.ResponseTruncated = e.w.body.snapshot()
	at.Operation, at.Scope, at.PaymentID = operation, scope, paymentID
	return at
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
