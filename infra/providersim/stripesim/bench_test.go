package stripesim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// benchSim is a simulator with fsync on and the webhook sender running against a
// receiver that acknowledges everything, as in the local stack.
func benchSim(b *testing.B) *Simulator {
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.Cleanup(hooks.Close)
	cfg := Config{DataDir: b.TempDir(), WebhookURL: hooks.URL}
	if os.Getenv("PROVIDERSIM_BENCH_NOHOOKS") != "" {
		cfg.WebhookURL = ""
	}
	if v, err := strconv.Atoi(os.Getenv("PROVIDERSIM_BENCH_BATCH")); err == nil {
		cfg.MaxBatchSize = v
	}
	if v, err := time.ParseDuration(os.Getenv("PROVIDERSIM_BENCH_DELAY")); err == nil {
		cfg.MaxBatchDelay = v
	}
	if os.Getenv("PROVIDERSIM_BENCH_NOSYNC") != "" {
		cfg.NoSync = true
	}
	sim, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sim.Start(ctx)
	b.Cleanup(func() { cancel(); _ = sim.Close() })
	return sim
}

func benchCreate(sim *Simulator, key string) int {
	req := httptest.NewRequest(http.MethodPost, "/v1/payment_intents",
		strings.NewReader("amount=2000&currency=usd&customer=cus_A&payment_method=pm_card_visa&confirm=true&metadata[invoice]=inv_1"))
	req.Header.Set("Authorization", "Bearer "+DefaultAPIKey)
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	return rec.Code
}

// BenchmarkCreateDistinctKeys: create+confirm with a fresh key each, 32 in flight.
func BenchmarkCreateDistinctKeys(b *testing.B) {
	sim := benchSim(b)
	var n atomic.Int64
	b.SetParallelism(16) // x GOMAXPROCS(2) = 32 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := benchCreate(sim, fmt.Sprint("k", n.Add(1))); code != 200 {
				b.Errorf("status %d", code)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	if fi, err := os.Stat(filepath.Join(sim.cfg.DataDir, DBFile)); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(b.N), "db-bytes/create")
	}
}

// BenchmarkCreateReplay: the same key again and again, 32 in flight.
func BenchmarkCreateReplay(b *testing.B) {
	sim := benchSim(b)
	if code := benchCreate(sim, "replayed"); code != 200 {
		b.Fatalf("status %d", code)
	}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := benchCreate(sim, "replayed"); code != 200 {
				b.Errorf("status %d", code)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
}

// BenchmarkCreateLoopback: create+confirm with fresh keys over loopback HTTP, 32 clients,
// as the local stack's Stripe adapter calls it.
func BenchmarkCreateLoopback(b *testing.B) {
	sim := benchSim(b)
	srv := httptest.NewServer(sim)
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/payment_intents",
				strings.NewReader("amount=2000&currency=usd&customer=cus_A&payment_method=pm_card_visa&confirm=true"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+DefaultAPIKey)
			req.Header.Set("Idempotency-Key", fmt.Sprint("loop", n.Add(1)))
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}
