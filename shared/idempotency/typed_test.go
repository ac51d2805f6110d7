package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/store"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Do[T] stores a typed result: a repeat decodes it without running the operation, a different
// request is a *MismatchError, a held key an *InProgressError, and a failure releases the key.
func TestTypedDo(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		runs := 0
		op := func(ctx context.Context) (order, error) {
			runs++
			return order{ID: "ord_1", Amount: 5}, nil
		}
		f := fp(t, `{"amount":5}`)
		for i, want := range []Kind{New, Replay, Replay} {
			got, out, err := Do(ctx, k, "local", "t-1", f, op)
			if err != nil || out.Kind != want || got != (order{ID: "ord_1", Amount: 5}) {
				t.Fatalf("call %d: %+v %v %v", i, got, out.Kind, err)
			}
		}
		if runs != 1 {
			t.Fatalf("op ran %d times", runs)
		}
		_, _, err := Do(ctx, k, "local", "t-1", fp(t, `{"amount":6}`), op)
		var mm *MismatchError
		if !errors.As(err, &mm) || !errors.Is(err, ErrMismatch) || fmt.Sprint(mm.Fields) != "[amount]" {
			t.Fatalf("mismatch: %v", err)
		}

		// A failure releases the key: the next call runs.
		boom := errors.New("boom")
		if _, _, err := Do(ctx, k, "local", "t-2", f, func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if v, out, err := Do(ctx, k, "local", "t-2", f, func(context.Context) (int, error) { return 7, nil }); err != nil || v != 7 || out.Kind != New {
			t.Fatalf("after release: %v %v %v", v, out.Kind, err)
		}

		// A held key: InProgressError with the wait.
		held, err := k.Acquire(ctx, "local", "t-3", f)
		if err != nil || held.Kind != New {
			t.Fatal(held.Kind, err)
		}
		_, _, err = Do(ctx, k, "local", "t-3", f, func(context.Context) (int, error) { t.Fatal("ran while held"); return 0, nil })
		var ip *InProgressError
		if !errors.As(err, &ip) || !errors.Is(err, ErrInProgress) || ip.RetryAfter <= 0 {
			t.Fatalf("in progress: %v", err)
		}
	})
}

// upper is a codec that is not JSON, to show the codec is the one used both ways.
type upper struct{}

func (upper) Marshal(v any) ([]byte, error)   { return []byte(strings.ToUpper(*v.(*string))), nil }
func (upper) Unmarshal(b []byte, v any) error { *v.(*string) = strings.ToLower(string(b)); return nil }
func (upper) ContentType() string             { return "text/upper" }
func (u upper) wrap() Codec                   { return ptrCodec{u} }

// ptrCodec hands the codec a pointer on Marshal too, as upper expects.
type ptrCodec struct{ upper }

func (p ptrCodec) Marshal(v any) ([]byte, error) { s := v.(string); return p.upper.Marshal(&s) }

func TestTypedDoPluggableCodec(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k := newKeeper(t, s, newClock())
		f := fp(t, `{}`)
		op := func(context.Context) (string, error) { return "hello", nil }
		if _, _, err := Do(ctx, k, "local", "c", f, op, WithCodec(upper{}.wrap())); err != nil {
			t.Fatal(err)
		}
		it, err := s.Get(ctx, Table, Scoped("local", "c"), "")
		if err != nil {
			t.Fatal(err)
		}
		var rec record
		if err := json.Unmarshal(it.Doc, &rec); err != nil || string(rec.Response.Body) != "HELLO" || rec.Response.Header["Content-Type"] != "text/upper" {
			t.Fatalf("stored %s (%v)", it.Doc, err)
		}
		v, out, err := Do(ctx, k, "local", "c", f, op, WithCodec(upper{}.wrap()))
		if err != nil || out.Kind != Replay || v != "hello" {
			t.Fatalf("replay %q %v %v", v, out.Kind, err)
		}
	})
}
