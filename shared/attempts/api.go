package attempts

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

// API records each request to an API handler and its answer as an inbound attempt, so a
// payment's timeline starts with what the caller asked and what we said. The handler that
// writes the answer begins the exchange and, once it has answered, files it: the log is told
// what happened, and calls nothing back.
//
// The attempts a request makes while it is served (its provider calls, recorded through a
// BestEffort RecordFunc) are stored beside the request's own writes rather than before them:
// each is written as soon as it is made, and the answer's first byte waits until every one is
// stored. A store that groups commits (the embedded store) then commits a call's attempt with
// the payment it produced, one commit where there were two; DynamoDB runs the two writes side
// by side. Either way no answer leaves before the calls behind it are on record.
type API struct {
	// Record stores the exchange once it is answered. Required. In a Lambda function, a
	// BestEffort RecordFunc: the exchange is stored before the invocation returns. In a
	// process that keeps running (the local stack), a Background's Record: the exchange is
	// stored a moment after its answer, in a round with others, and the answer does not wait
	// for it. Its provider calls are stored before the answer either way.
	Record RecordFunc
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Begin starts recording r. It reads the start of the body aside (the handler still reads the
// whole of it) and returns the writer the answer must be written to, the request to serve
// (r, with a context that makes the attempts recorded while serving it wait for the answer
// instead of holding up the handler), and the func that files the exchange, once answered,
// under the handler's operation ("payments.create"), the caller's scope and the payment it
// concerns ("" for none). The func must be called, answered or not (defer it): it waits for
// the request's attempts.
func (a API) Begin(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func(operation, scope, paymentID string)) {
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
	p := &pending{ctx: r.Context()}
	r = r.WithContext(context.WithValue(r.Context(), pendingKey{}, p))
	rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK, pending: p}
	return rw, r, func(operation, scope, paymentID string) {
		p.wait()
		at := FromRequest(r, body, rw.status)
		at.Provider = "api"
		at.StartedAt, at.Duration = start, now().Sub(start)
		at.ResponseHeader = redact.Header(rw.Header())
		at.ResponseBody, at.ResponseBytes, at.ResponseTruncated = rw.body.snapshot()
		at.Operation, at.Scope, at.PaymentID = operation, scope, paymentID
		if a.Record != nil {
			// p.ctx is the request's context without its pending attempts: a BestEffort
			// Record stores the exchange in line, before the handler (the invocation) returns.
			a.Record(p.ctx, at)
		}
	}
}

// pending is the attempts an API request is storing while it is served: BestEffort starts
// each and returns, and the request's answer waits for them all.
type pending struct {
	ctx context.Context // the request's: the attempts' stores end with it
	wg  sync.WaitGroup
}

type pendingKey struct{}

// start runs store behind its caller, with a context that keeps ctx's values (ids, the
// logger's attributes) but ends with the request rather than with ctx: a provider call's own
// context ends as soon as the call returns.
func (p *pending) start(ctx context.Context, store func(context.Context)) {
	p.wg.Go(func() {
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(p.ctx, cancel)()
		store(ctx)
	})
}

func (p *pending) wait() { p.wg.Wait() }

// pendingOf is the request's pending attempts, if ctx is an API request's (API.Begin).
func pendingOf(ctx context.Context) *pending {
	p, _ := ctx.Value(pendingKey{}).(*pending)
	return p
}

// recordingWriter copies a response aside (up to DefaultCaptureLimit) as it is written.
// Nothing of the answer passes before the request's pending attempts are stored.
type recordingWriter struct {
	http.ResponseWriter
	pending *pending
	status  int
	wrote   bool
	body    capture
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.pending.wait()
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.pending.wait()
		w.wrote = true
	}
	if w.body.limit == 0 {
		w.body.limit = DefaultCaptureLimit
	}
	w.body.write(p)
	return w.ResponseWriter.Write(p)
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
