package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Codec turns an operation's typed result into the bytes stored under its key and back. A
// replay decodes what the first run encoded, so a codec must round-trip every value its
// operations return.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
	// ContentType names the encoding, stored with the bytes (Response.Header "Content-Type").
	ContentType() string
}

// JSONCodec is the default Codec: encoding/json.
type JSONCodec struct{}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// ContentType implements Codec.
func (JSONCodec) ContentType() string { return "application/json" }

// Errors of the typed API (Do): Outcome kinds that are not a result.
var (
	// ErrInProgress matches an *InProgressError: another caller holds the key.
	ErrInProgress = errors.New("idempotency: key in progress")
	// ErrMismatch matches a *MismatchError: the key was used with another request.
	ErrMismatch = errors.New("idempotency: key used with a different request")
)

// InProgressError is what Do returns while another caller holds the key.
type InProgressError struct {
	Key        string
	RetryAfter time.Duration
	// LockExpiresAt is when the holder's lock lapses (Outcome.LockExpiresAt).
	LockExpiresAt time.Time
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: key %s in progress; retry after %s", e.Key, e.RetryAfter)
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// MismatchError is what Do returns when the key was used with a different request; Fields names
// the top-level fields that differ (possibly none can be named).
type MismatchError struct {
	Key    string
	Fields []string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idempotency: key %s used with a different request (fields %v)", e.Key, e.Fields)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// CallOption tunes one Do call.
type CallOption func(*call)

type call struct {
	codec Codec
}

// WithCodec serializes the result with c instead of JSON.
func WithCodec(c Codec) CallOption { return func(o *call) { o.codec = c } }

// Do makes op idempotent under (scope, key) for any result type T, stored with a Codec (JSON by
// default): the first call runs op and stores its result; a repeat decodes the stored result
// without running op. The result is all op commits: an operation with effects of its own, or
// an outcome that must not be replayed, returns them in a Result to Keeper.Run.
//
// A repeat while the key is held gets an *InProgressError, a repeat with another fingerprint a
// *MismatchError; if op fails, the key is released and op's error returned. The Outcome says
// which way the result came (New, Replay).
func Do[T any](ctx context.Context, k *Keeper, scope, key string, fp Fingerprint, op func(ctx context.Context) (T, error), opts ...CallOption) (T, Outcome, error) {
	c := call{codec: JSONCodec{}}
	for _, o := range opts {
		o(&c)
	}
	var (
		zero  T
		fresh T
		ran   bool
	)
	out, err := k.Run(ctx, scope, key, fp, func(ctx context.Context, _ *Lease) (Result, error) {
		v, err := op(ctx)
		if err != nil {
			return Result{}, err
		}
		b, err := c.codec.Marshal(v)
		if err != nil {
			return Result{}, fmt.Errorf("idempotency: encode result: %w", err)
		}
		fresh, ran = v, true
		return Result{Response: Response{Status: 200, Header: map[string]string{"Content-Type": c.codec.ContentType()}, Body: b},
			Final: true}, nil
	})
	if err != nil {
		return zero, out, err
	}
	switch out.Kind {
	case InProgress:
		return zero, out, &InProgressError{Key: key, RetryAfter: out.RetryAfter, LockExpiresAt: out.LockExpiresAt}
	case Mismatch:
		return zero, out, &MismatchError{Key: key, Fields: out.Fields}
	}
	if ran {
		return fresh, out, nil // the value op returned, not a decode of its bytes
	}
	if out.Response == nil {
		return zero, out, fmt.Errorf("idempotency: %s outcome of %s has no result", out.Kind, key)
	}
	var v T
	if err := c.codec.Unmarshal(out.Response.Body, &v); err != nil {
		return zero, out, fmt.Errorf("idempotency: decode stored result of %s: %w", key, err)
	}
	return v, out, nil
}
