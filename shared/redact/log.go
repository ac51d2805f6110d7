package redact

import (
	"context"
	"log/slog"
)

// LogHandler wraps a slog.Handler so that every log line goes out redacted and capped:
// the message and every string attribute (at any group depth, including those added with
// With) pass through CapLog, and error attributes are written as their capped, redacted text.
//
// It is the one place that keeps outside input from reaching a log raw, whichever package
// logs it: an Idempotency-Key that is a card number ("key=k#local#4242…"), a claimed event id
// of 200 KiB, a secret in an error. Wrap the process's logger with it once, at wiring time.
func LogHandler(h slog.Handler) slog.Handler {
	if r, ok := h.(redactingHandler); ok {
		return r
	}
	return redactingHandler{next: h}
}

type redactingHandler struct{ next slog.Handler }

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, CapLog(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactingHandler{next: h.next.WithAttrs(red)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{next: h.next.WithGroup(CapLog(name))}
}

func redactAttr(a slog.Attr) slog.Attr {
	a.Key = CapLog(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(CapLog(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, x := range g {
			red[i] = redactAttr(x)
		}
		a.Value = slog.GroupValue(red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			a.Value = slog.StringValue(CapLog(x.Error()))
		case []byte:
			a.Value = slog.StringValue(CapLog(string(x)))
		default:
			// Anything else (a struct, a stringer) is written as its text, redacted and capped:
			// a handler would otherwise print it whole.
			a.Value = slog.StringValue(CapLog(v.String()))
		}
	case slog.KindInt64, slog.KindUint64:
		// A 13-19 digit number may be a card number logged as one.
		if t := v.String(); len(t) >= 13 && Text(t) != t {
			a.Value = slog.StringValue(Text(t))
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
