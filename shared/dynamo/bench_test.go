package dynamo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// inFlight is the concurrency of the parallel benchmarks.
const inFlight = 16

// benchPaths runs op sequentially and with inFlight goroutines, reporting ops/s. op gets a
// number unique across the benchmark, for fresh keys.
// calls counts the requests of each run, so retries inside the SDK show as requests/op.
func benchPaths(b *testing.B, calls *CallCounter, op func(ctx context.Context, n int64) error) {
	var seq atomic.Int64
	ctx := context.Background()
	b.Run("seq", func(b *testing.B) {
		calls.Reset()
		for b.Loop() {
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		b.ReportMetric(float64(calls.Total())/float64(b.N), "requests/op")
	})
	b.Run(fmt.Sprintf("par%d", inFlight), func(b *testing.B) {
		calls.Reset()
		b.SetParallelism(max(1, inFlight/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(ctx, seq.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		b.ReportMetric(float64(calls.Total())/float64(b.N), "requests/op")
	})
}

func benchStore(b *testing.B) (*Store, *CallCounter) {
	calls := new(CallCounter)
	client := NewClient(testEndpoint(b), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.Middleware())
	})
	return New(client, newTables(b, client, storetest.Simple, storetest.Sorted)), calls
}

var benchDoc = []byte(`{"status":"completed","response":{"status":200,"body":"{\"id\":\"pi_123\",\"amount\":1000}"}}`)

// BenchmarkPutNew is the first attempt of a key: one conditional PutItem that succeeds.
func BenchmarkPutNew(b *testing.B) {
	s, calls := benchStore(b)
	benchPaths(b, calls, func(ctx context.Context, n int64) error {
		return s.Put(ctx, storetest.Simple, store.Item{PK: fmt.Sprintf("new-%d", n), Doc: benchDoc, Version: 1, LockExpiresAt: 2e9},
			store.Cond{Kind: store.NotExistsOrLapsed, Now: 1e9})
	})
}

// BenchmarkPutReplay is the duplicate: one conditional PutItem that fails and brings the stored
// item back in the same call.
func BenchmarkPutReplay(b *testing.B) {
	s, calls := benchStore(b)
	if err := s.Put(context.Background(), storetest.Simple, store.Item{PK: "dup", Doc: benchDoc, Version: 1}, store.Cond{}); err != nil {
		b.Fatal(err)
	}
	benchPaths(b, calls, func(ctx context.Context, _ int64) error {
		err := s.Put(ctx, storetest.Simple, store.Item{PK: "dup", Doc: benchDoc, Version: 2, LockExpiresAt: 2e9},
			store.Cond{Kind: store.NotExistsOrLapsed, Now: 1e9})
		var ce *store.ConditionError
		if !errors.As(err, &ce) || ce.Old == nil {
			return fmt.Errorf("want a condition error with the old item, got %v", err)
		}
		return nil
	})
}

// BenchmarkTransact2 is the commit of a new key: the record and its effect in one
// TransactWriteItems of two conditional puts.
func BenchmarkTransact2(b *testing.B) {
	s, calls := benchStore(b)
	benchPaths(b, calls, func(ctx context.Context, n int64) error {
		return s.Transact(ctx,
			store.Write{Table: storetest.Simple, Put: &store.Item{PK: fmt.Sprintf("rec-%d", n), Doc: benchDoc, Version: 2},
				Cond: store.Cond{Kind: store.NotExists}},
			store.Write{Table: storetest.Sorted, Put: &store.Item{PK: fmt.Sprintf("pay-%d", n), SK: "effect", Doc: benchDoc, Version: 1,
				IndexPK: "open", IndexSK: fmt.Sprintf("2026-11-29#%d", n)}, Cond: store.Cond{Kind: store.NotExists}},
		)
	})
}
