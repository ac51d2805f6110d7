package asl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// countingStore counts checkpoints.
type countingStore struct {
	Store
	saves atomic.Int64
}

func (s *countingStore) Save(ctx context.Context, rec *Record, events []HistoryEvent) error {
	s.saves.Add(1)
	return s.Store.Save(ctx, rec, events)
}

// BenchmarkTransitions measures state transitions per second with durable (fsync'd)
// checkpoints. Each execution loops Task -> Choice, the shape of a recovery attempt: one
// checkpoint per Task call (the Choice shares it). b.N is the number of transitions, spread
// over the executions.
func BenchmarkTransitions(b *testing.B) {
	const def = `{"StartAt":"Init","States":{
		"Init":{"Type":"Pass","Parameters":{"i":0,"n.$":"$.n"},"Next":"Inc"},
		"Inc":{"Type":"Task","Resource":"echo","Parameters":{"i.$":"States.MathAdd($.i, 1)","n.$":"$.n"},"Next":"Check"},
		"Check":{"Type":"Choice","Choices":[{"Variable":"$.i","NumericLessThanPath":"$.n","Next":"Inc"}],"Default":"Done"},
		"Done":{"Type":"Succeed"}}}`
	cases := []struct {
		name       string
		executions int
		batch      bool
	}{
		{"1 execution", 1, false},
		{"16 executions", 16, false},
		{"16 executions batched", 16, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var opts []BoltOption
			if c.batch {
				db.MaxBatchSize = c.executions
				db.MaxBatchDelay = 2 * time.Millisecond
				opts = append(opts, WithBatch())
			}
			store, err := NewBoltStore(db, opts...)
			if err != nil {
				b.Fatal(err)
			}
			counted := &countingStore{Store: store}
			echo := func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }
			r := New(counted, TaskRegistry{"echo": echo}, WithConcurrency(c.executions),
				WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			defer r.Close()
			if err := r.Define("loop", []byte(def)); err != nil {
				b.Fatal(err)
			}
			// Transitions per execution: Init, then 2 per loop (Inc, Check), then Done.
			loops := max(1, b.N/c.executions/2)
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			arns := make([]string, c.executions)
			for i := range arns {
				ex, err := r.StartExecution(ctx, "loop", fmt.Sprintf("run-%d-%d", b.N, i), fmt.Appendf(nil, `{"n":%d}`, loops))
				if err != nil {
					b.Fatal(err)
				}
				arns[i] = ex.ExecutionArn
			}
			total := 0
			for _, arn := range arns {
				ex, err := r.AwaitExecution(ctx, arn)
				if err != nil || ex.Status != StatusSucceeded {
					b.Fatalf("%v %s %s", err, ex.Status, ex.Cause)
				}
				total += ex.StateTransitions
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(total)/elapsed.Seconds(), "transitions/s")
			b.ReportMetric(float64(counted.saves.Load())/elapsed.Seconds(), "checkpoints/s")
		})
	}
}
