// Package idemlambda makes any aws-lambda-go handler idempotent with package idempotency: the
// key is chosen by an RFC 9535 JSONPath over the event (Powertools' event_key_jmespath), an
// optional second path picks the payload a repeat must match (payload_validation_jmespath), and
// an SQS batch runs each record under its own key, reporting only the records that failed
// (events.SQSEventResponse, ReportBatchItemFailures, through package sqsbatch); Message does
// the same for one plain queue.Message.
//
// The in-progress lock lasts until the Lambda deadline in the handler's context plus the
// Keeper's LockMargin, so a function that timed out frees its key for the next delivery as soon
// as it can no longer be running; completed records expire after the Keeper's Retention.
package idemlambda

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/theory/jsonpath"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// ErrNoKey is returned (RaiseOnMissingKey) when the key path selects nothing, or only nulls.
var ErrNoKey = errors.New("idemlambda: the event has no idempotency key")

// Config configures Wrap and SQS.
type Config[R any] struct {
	// Keeper runs the record lifecycle (required).
	Keeper *idempotency.Keeper
	// KeyPath is an RFC 9535 JSONPath over the event as JSON choosing the key: "$" (the
	// default for Wrap) uses the whole event, "$.messageId" is SQS's default. Several
	// selected nodes make one key together. A single string that is a valid key is used as it
	// is; anything else is hashed (SHA-256 of its canonical JSON).
	KeyPath string
	// ValidationPath, when set, selects the part of the event a repeat must match: a repeat
	// whose selection differs gets an *idempotency.MismatchError instead of the stored result.
	// Empty: a repeat is only matched by its key.
	ValidationPath string
	// RaiseOnMissingKey makes an event without a key an error (ErrNoKey). Otherwise such an
	// event runs the handler without idempotency, with a warning.
	RaiseOnMissingKey bool
	// KeyPrefix scopes the keys (default the function name, lambdacontext.FunctionName, or
	// "lambda" outside Lambda): two functions never share a key.
	KeyPrefix string
	// Codec stores the result (default JSON).
	Codec idempotency.Codec
	// ResponseHook, when set, rewrites a result served from the store (a replay or a pending
	// key's interim result); it sees the outcome. Fresh results pass as they are.
	ResponseHook func(ctx context.Context, r R, out idempotency.Outcome) R
	// Log receives the warnings (default slog.Default()).
	Log *slog.Logger
}

type compiled[R any] struct {
	cfg      Config[R]
	key      *jsonpath.Path
	validate *jsonpath.Path
	prefix   string
	opts     []idempotency.CallOption
}

func compile[R any](cfg Config[R], defaultKey string) (*compiled[R], error) {
	if cfg.Keeper == nil {
		return nil, errors.New("idemlambda: Config.Keeper is required")
	}
	c := &compiled[R]{cfg: cfg, prefix: cfg.KeyPrefix}
	if cfg.KeyPath == "" {
		cfg.KeyPath = defaultKey
	}
	var err error
	if c.key, err = jsonpath.Parse(cfg.KeyPath); err != nil {
		return nil, fmt.Errorf("idemlambda: KeyPath %q: %w", cfg.KeyPath, err)
	}
	if cfg.ValidationPath != "" {
		if c.validate, err = jsonpath.Parse(cfg.ValidationPath); err != nil {
			return nil, fmt.Errorf("idemlambda: ValidationPath %q: %w", cfg.ValidationPath, err)
		}
	}
	if c.prefix == "" {
		c.prefix = lambdacontext.FunctionName
	}
	if c.prefix == "" {
		c.prefix = "lambda"
	}
	if cfg.Codec != nil {
		c.opts = append(c.opts, idempotency.WithCodec(cfg.Codec))
	}
	if c.cfg.Log == nil {
		c.cfg.Log = slog.Default()
	}
	return c, nil
}

// noValidation is the fingerprint of every event when no ValidationPath is set: repeats match
// by key alone (an SQS redelivery differs in its receive count, never in what it asks).
var noValidation = idempotency.Fingerprint{Sum: "no-validation"}

// keyOf selects the key and the fingerprint from a decoded event. ok is false when the key
// path selects nothing but nulls.
func (c *compiled[R]) keyOf(doc any) (key string, fp idempotency.Fingerprint, ok bool, err error) {
	nodes := c.key.Select(doc)
	var sel []any
	for _, n := range nodes {
		if n != nil {
			sel = append(sel, n)
		}
	}
	if len(sel) == 0 {
		return "", fp, false, nil
	}
	if s, isStr := sel[0].(string); len(sel) == 1 && isStr && len(s) <= idempotency.MaxKeyLen-2 && idempotency.ValidateKey(s) == nil {
		key = "v:" + s
	} else {
		var v any = sel
		if len(sel) == 1 {
			v = sel[0]
		}
		b, err := json.Marshal(v) // encoding/json sorts map keys: canonical for decoded JSON
		if err != nil {
			return "", fp, false, err
		}
		h := sha256.Sum256(b)
		key = "h:" + hex.EncodeToString(h[:])
	}
	fp = noValidation
	if c.validate != nil {
		b, err := json.Marshal(c.validate.Select(doc))
		if err != nil {
			return "", fp, false, err
		}
		if fp, err = idempotency.FingerprintJSON(b); err != nil {
			return "", fp, false, err
		}
	}
	return key, fp, true, nil
}

// decode turns any event into the form JSONPath selects from.
func decode(ev any) (any, []byte, error) {
	var b []byte
	switch v := ev.(type) {
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(ev); err != nil {
			return nil, nil, fmt.Errorf("idemlambda: event: %w", err)
		}
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("idemlambda: event is not JSON: %w", err)
	}
	return doc, b, nil
}

func (c *compiled[R]) run(ctx context.Context, doc any, raw []byte, h func(context.Context) (R, error)) (R, idempotency.Outcome, error) {
	key, fp, ok, err := c.keyOf(doc)
	if err != nil {
		var zero R
		return zero, idempotency.Outcome{}, err
	}
	if !ok {
		if c.cfg.RaiseOnMissingKey {
			var zero R
			return zero, idempotency.Outcome{}, ErrNoKey
		}
		c.cfg.Log.WarnContext(ctx, "idempotency key missing; the handler runs without idempotency", "key_path", c.key.String())
		r, err := h(ctx)
		return r, idempotency.Outcome{}, err
	}
	r, out, err := idempotency.Do(ctx, c.cfg.Keeper, c.prefix, key, fp, h, c.opts...)
	if err == nil && c.cfg.ResponseHook != nil && (out.Kind == idempotency.Replay || out.Kind == idempotency.Pending) && !out.Resumed {
		r = c.cfg.ResponseHook(ctx, r, out)
	}
	return r, out, err
}

// Wrap makes handler h idempotent: an event whose key completed before gets the stored result
// without running h; one whose key is held gets an *idempotency.InProgressError (Lambda retries
// an asynchronous event; a synchronous caller retries after RetryAfter); one whose validation
// payload differs an *idempotency.MismatchError. If h fails, the key is released and the error
// returned, so the retry runs h again.
//
// E is any event type aws-lambda-go decodes (events.APIGatewayProxyRequest, a struct of your
// own, json.RawMessage); the key and validation paths see it as JSON.
func Wrap[E, R any](cfg Config[R], h func(context.Context, E) (R, error)) (func(context.Context, E) (R, error), error) {
	c, err := compile(cfg, "$")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev E) (R, error) {
		doc, raw, err := decode(ev)
		if err != nil {
			var zero R
			return zero, err
		}
		r, _, err := c.run(ctx, doc, raw, func(ctx context.Context) (R, error) { return h(ctx, ev) })
		return r, err
	}, nil
}

// SQS makes an SQS batch handler out of h, each record idempotent under its own key: by
// default its messageId, so a redelivered message that completed is not run again. The key and
// validation paths see the record as JSON (the field names of the Lambda event: messageId,
// body, attributes, messageAttributes, ...) with body decoded when it is JSON, so
// "$.body.order_id" selects a field of the message.
//
// The batch runs through sqsbatch, the adapter every queue consumer of twice uses: a record
// whose handler fails, whose key is held by another delivery, or that mismatches is logged and
// reported in BatchItemFailures, so SQS delivers it again (and, after maxReceiveCount, to the
// dead-letter queue); the rest of the batch is done. For a FIFO queue (its ARN ends in
// ".fifo") the records after a failed one are reported too without running, so the queue's
// order holds.
func SQS(cfg Config[struct{}], h func(context.Context, events.SQSMessage) error) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	c, err := compile(cfg, "$.messageId")
	if err != nil {
		return nil, err
	}
	b := &sqsbatch.Batch{EachRecord: func(ctx context.Context, m events.SQSMessage) error { return c.record(ctx, m, h) },
		Log: c.cfg.Log}
	return b.Handle, nil
}

// Message is SQS for one plain message, the per-message func of package sqsbatch: h runs under
// the message's key, chosen by the same paths over the message's Lambda record (rebuilt with
// queue.Event: messageId, body, attributes, messageAttributes, eventSourceARN; no awsRegion), so
// (&sqsbatch.Batch{Each: Message(cfg, h)}).Handle keys a message as SQS(cfg, ...) does. A message whose key
// is held, or that mismatches, gets the error, as does one whose h fails.
func Message(cfg Config[struct{}], h func(context.Context, queue.Message) error) (func(context.Context, queue.Message) error, error) {
	c, err := compile(cfg, "$.messageId")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, m queue.Message) error {
		r := queue.Event(m.Source, "", []queue.Message{m}).Records[0]
		return c.record(ctx, r, func(ctx context.Context, _ events.SQSMessage) error { return h(ctx, m) })
	}, nil
}

func (c *compiled[R]) record(ctx context.Context, m events.SQSMessage, h func(context.Context, events.SQSMessage) error) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	var body any
	if json.Unmarshal([]byte(m.Body), &body) == nil {
		doc["body"] = body
	}
	var zero R
	_, _, err = c.run(ctx, doc, raw, func(ctx context.Context) (R, error) { return zero, h(ctx, m) })
	return err
}
