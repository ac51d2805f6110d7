package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/store"
)

// Benchmarks run on every store in storeMakers, with 32 concurrent callers, as an API under load
// would have. RawCommit is the store's own durable commit rate for one unconditional put under
// the same concurrency (grouped commits), RawCommitSequential the same with one writer (one
// fsync per put), measured beside the lifecycle so they can be compared in one run.
//
//	go test -run XXX -bench . -benchtime 2s ./shared/idempotency

const benchParallel = 16 // x GOMAXPROCS(2) = 32 goroutines

var benchSeq atomic.Int64

func benchStores(b *testing.B, fn func(b *testing.B, s store.Store)) {
	for name, mk := range storeMakers {
		b.Run(name, func(b *testing.B) { fn(b, mk(b)) })
	}
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkRawCommit(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		doc := []byte(strings.Repeat("x", 300))
		b.SetParallelism(benchParallel)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				it := store.Item{PK: "raw-" + strconv.FormatInt(benchSeq.Add(1), 10), Doc: doc}
				if err := s.Put(context.Background(), Table, it, store.Cond{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
}

// BenchmarkRawCommitSequential is one writer, one durable (fsync'd) commit per put: the
// store's raw commit rate without grouping.
func BenchmarkRawCommitSequential(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		doc := []byte(strings.Repeat("x", 300))
		ctx := context.Background()
		for b.Loop() {
			it := store.Item{PK: "seq-" + strconv.FormatInt(benchSeq.Add(1), 10), Doc: doc}
			if err := s.Put(ctx, Table, it, store.Cond{}); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
}

func BenchmarkAcquireComplete(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		k, _ := NewKeeper(Keeper{Store: s, Log: quiet})
		f := FingerprintBytes([]byte(`{"amount":1000}`))
		resp := Response{Status: 201, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(strings.Repeat("r", 250))}
		b.SetParallelism(benchParallel)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				key := "new-" + strconv.FormatInt(benchSeq.Add(1), 10)
				out, err := k.Acquire(ctx, "bench", key, f)
				if err != nil || out.Kind != New {
					b.Errorf("acquire: %v %v", out.Kind, err)
					return
				}
				effect := store.Write{Table: "payments", Put: &store.Item{PK: key, Doc: resp.Body}}
				if err := k.Complete(ctx, out.Lease, resp, effect); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
}

func BenchmarkReplay(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		k, _ := NewKeeper(Keeper{Store: s, Log: quiet})
		f := FingerprintBytes([]byte(`{"amount":1000}`))
		ctx := context.Background()
		const keys = 1000
		for i := range keys {
			out, _ := k.Acquire(ctx, "bench", fmt.Sprint("replay-", i), f)
			if err := k.Complete(ctx, out.Lease, Response{Status: 201, Body: []byte(strings.Repeat("r", 250))}); err != nil {
				b.Fatal(err)
			}
		}
		b.SetParallelism(benchParallel)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				out, err := k.Acquire(ctx, "bench", fmt.Sprint("replay-", i%keys), f)
				if err != nil || out.Kind != Replay {
					b.Errorf("replay: %v %v", out.Kind, err)
					return
				}
			}
		})
		reportRate(b)
	})
}

// BenchmarkMillionRecords fills the embedded store with 1,000,000 completed idempotency records
// (in transactions of 100, as a long-running stack accumulates them) and then replays random
// keys, reporting the process's peak resident set. Run it alone:
//
//	go test -run XXX -bench MillionRecords -benchtime 1x ./shared/idempotency
func BenchmarkMillionRecords(b *testing.B) {
	s := storeMakers["bolt"](b)
	ctx := context.Background()
	k, _ := NewKeeper(Keeper{Store: s, Log: quiet})
	f := FingerprintBytes([]byte(`{"amount":1000}`))
	const total, per = 1_000_000, 100
	now := time.Now()
	for b.Loop() {
		for i := 0; i < total; i += per {
			ws := make([]store.Write, per)
			for j := range ws {
				rec := record{Status: StatusCompleted, Fingerprint: f, CreatedAt: now, CompletedAt: &now,
					Response: &Response{Status: 201, Header: map[string]string{"Content-Type": "application/json"},
						Body: fmt.Appendf(nil, `{"id":"pay_%08d","status":"succeeded","amount":1000,"currency":"usd","customer":"cus_123"}`, i+j)}}
				doc, _ := jsonMarshal(rec)
				ws[j] = store.Write{Table: Table, Put: &store.Item{PK: Scoped("bench", fmt.Sprintf("key-%x", (i+j)*2654435761%(1<<32))), Doc: doc, Version: 1, ExpiresAt: now.Add(7 * 24 * time.Hour).Unix()}}
			}
			if err := s.Transact(ctx, ws...); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < 100_000; i++ {
			n := (i * 7919) % total
			out, err := k.Acquire(ctx, "bench", fmt.Sprintf("key-%x", n*2654435761%(1<<32)), f)
			if err != nil || out.Kind != Replay {
				b.Fatalf("replay %d: %v %v", n, out.Kind, err)
			}
		}
	}
	hwm, rss := procStatus("VmHWM"), procStatus("VmRSS")
	b.ReportMetric(hwm/1024, "peak-RSS-MB")
	b.ReportMetric(rss/1024, "RSS-MB")
	if fi, err := os.Stat(s.(interface{ DB() *boltDB }).DB().Path()); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
	}
}

// procStatus reads a kB figure from /proc/self/status (0 where there is none).
func procStatus(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n
		}
	}
	return 0
}

type boltDB = bbolt.DB

var jsonMarshal = json.Marshal
