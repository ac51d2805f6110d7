package asl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/clock"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t      *testing.T
	db     *bolt.DB
	store  *BoltStore
	clock  *clock.Fake
	runner *Runner
}

func openDB(t *testing.T, file string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(file, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// newHarness builds a runner on a fresh bbolt file with a fake clock and a seeded rand.
func newHarness(t *testing.T, tasks Tasks, opts ...Option) *harness {
	t.Helper()
	db := openDB(t, filepath.Join(t.TempDir(), "asl.db"))
	t.Cleanup(func() { db.Close() })
	return newHarnessOn(t, db, clock.NewFake(t0), tasks, opts...)
}

func newHarnessOn(t *testing.T, db *bolt.DB, clock *clock.Fake, tasks Tasks, opts ...Option) *harness {
	t.Helper()
	store, err := NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]Option{WithClock(clock), WithRand(rand.New(rand.NewPCG(1, 2))),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithCloseGrace(time.Second)}, opts...)
	r := New(store, tasks, all...)
	t.Cleanup(func() { r.Close() })
	return &harness{t: t, db: db, store: store, clock: clock, runner: r}
}

func (h *harness) define(name, def string) {
	h.t.Helper()
	if err := h.runner.Define(name, []byte(def)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) start(sm, name, input string) Execution {
	h.t.Helper()
	ex, err := h.runner.StartExecution(context.Background(), sm, name, []byte(input))
	if err != nil {
		h.t.Fatal(err)
	}
	return ex
}

func (h *harness) await(arn string) Execution {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ex, err := h.runner.AwaitExecution(ctx, arn)
	if err != nil {
		h.t.Fatal(err)
	}
	return ex
}

func (h *harness) history(arn string) []HistoryEvent {
	h.t.Helper()
	evs, err := h.runner.GetExecutionHistory(context.Background(), arn)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func eventTypes(evs []HistoryEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func constTask(out string) TaskFunc {
	return func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(out), nil }
}

func newSeeded() *rand.Rand { return rand.New(rand.NewPCG(7, 11)) }

func errorsJoinWrap(err error) error { return fmt.Errorf("outer: %w", err) }
