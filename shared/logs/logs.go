package logs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// The fields every log line of a function carries, named as Powertools' logger names them so
// the same Logs Insights queries work across languages.
const (
	FieldFunctionName = "function_name"
	FieldRequestID    = "function_request_id"
	FieldColdStart    = "cold_start"
	FieldTraceID      = "xray_trace_id"
)

// invocation is what the logger adds for the invocation in progress.
type invocation struct {
	requestID string
	traceID   string
	cold      bool
}

type invocationKey struct{}

// Invocations counts invocations and remembers the current one. Lambda runs one invocation at
// a time in an execution environment, so a log call without the invocation's context (a
// library's log.Info) still gets its request id.
type Invocations struct {
	n       atomic.Int64
	current atomic.Pointer[invocation]
}

// process is the one Invocations of a function's process.
var process Invocations

// Handler wraps a handler (anything lambda.NewHandler takes) so that the log lines of each
// invocation carry its request id, trace id and whether it was the container's first (cold
// start). Mains call lambda.Start(logs.Handler(h)).
func Handler(h any) lambda.Handler { return process.wrap(lambda.NewHandler(h)) }

type handlerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f handlerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

func (iv *Invocations) wrap(next lambda.Handler) lambda.Handler {
	return handlerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		return next.Invoke(iv.begin(ctx), payload)
	})
}

// begin records the invocation ctx belongs to and returns ctx carrying it.
func (iv *Invocations) begin(ctx context.Context) context.Context {
	inv := &invocation{cold: iv.n.Add(1) == 1}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		inv.requestID = lc.AwsRequestID
	}
	// aws-lambda-go puts the X-Ray header under this string key.
	if tr, ok := ctx.Value("x-amzn-trace-id").(string); ok {
		inv.traceID = traceRoot(tr)
	}
	iv.current.Store(inv)
	return context.WithValue(ctx, invocationKey{}, inv)
}

// traceRoot is the Root=... part of an X-Ray trace header, the trace id X-Ray shows.
func traceRoot(h string) string {
	for part := range strings.SplitSeq(h, ";") {
		if v, ok := strings.CutPrefix(part, "Root="); ok {
			return v
		}
	}
	return h
}

// Logger is the JSON logger every function uses (Lambda's JSON log format keeps it as is):
// each line carries function_name and, during an invocation, function_request_id,
// cold_start and xray_trace_id.
func Logger() *slog.Logger {
	return process.logger(os.Stderr, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
}

func (iv *Invocations) logger(w io.Writer, function string) *slog.Logger {
	h := slog.Handler(slog.NewJSONHandler(w, nil))
	if function != "" {
		h = h.WithAttrs([]slog.Attr{slog.String(FieldFunctionName, function)})
	}
	return slog.New(&contextHandler{next: h, iv: iv})
}

// contextHandler adds the invocation's fields to each record.
type contextHandler struct {
	next slog.Handler
	iv   *Invocations
}

func (h *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	if inv == nil {
		inv = h.iv.current.Load()
	}
	if inv != nil {
		r.AddAttrs(slog.String(FieldRequestID, inv.requestID), slog.Bool(FieldColdStart, inv.cold))
		if inv.traceID != "" {
			r.AddAttrs(slog.String(FieldTraceID, inv.traceID))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &contextHandler{next: h.next.WithAttrs(as), iv: h.iv}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{next: h.next.WithGroup(name), iv: h.iv}
}

// Fatal logs err and exits non-zero: the one place a main gives up, during INIT, where Lambda
// reports the failure and retries the cold start.
func Fatal(log *slog.Logger, msg string, err error) {
	log.Error(msg, "error", err)
	os.Exit(1)
}
