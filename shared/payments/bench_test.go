package payments

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/provider"
)

// BenchmarkReplay answers POST /payments replays through the service's handler on the embedded
// store from 32 callers, each exchange filed in the attempt log in line, behind the answer (the
// local stack) or not at all: the local stack's replay path without the network. CPU time,
// allocations and pages written per replay (the background rows' included) are what a loaded
// machine does not move the way it moves a rate.
//
//	go test -run XXX -bench Replay -benchmem ./shared/payments
func BenchmarkReplay(b *testing.B) {
	b.Run("inline", func(b *testing.B) { benchReplay(b, "inline") })
	b.Run("background", func(b *testing.B) { benchReplay(b, "background") })
	b.Run("unrecorded", func(b *testing.B) { benchReplay(b, "") })
}

// benchReplay files each exchange as record says: "inline" before the answer (a Lambda
// function), "background" a replay's behind it (the local stack), "" not at all (the floor).
func benchReplay(b *testing.B, record string) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	quiet := slog.New(slog.DiscardHandler)
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	log, err := attempts.NewLog(attempts.Log{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	svc := &Service{Store: s, Keeper: k, Provider: &scriptedProvider{calls: map[string]int{}, outcome: outcomes},
		Resolver: &jobs{}, OnDecline: &declines{}, Log: quiet, Classify: func(d provider.Decline) string { return d.Code }}
	inline := attempts.BestEffort(log, quiet)
	bg := attempts.NewBackground(log, quiet, 0)
	defer bg.Close()
	switch record {
	case "inline":
		svc.Exchanges = attempts.API{Record: inline}
	case "background":
		svc.Exchanges = attempts.API{Record: bg.Record}
	}
	h := svc.Handler(func(*http.Request) string { return "local" })
	const keys = 256
	do := func(i int) int {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body("pm_card_visa")))
		r.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i%keys))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range keys {
		if code := do(i); code != http.StatusCreated {
			b.Fatalf("create %d: %d", i, code)
		}
	}
	writes, cpu := pageWrites(s), cpuTime()
	b.SetParallelism(16) // x GOMAXPROCS(2) = 32 callers
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if code := do(i); code != http.StatusCreated {
				b.Errorf("replay: %d", code)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
	if err := bg.Flush(context.Background()); err != nil { // the rows' cost is the replays' too
		b.Fatal(err)
	}
	b.ReportMetric(float64(pageWrites(s)-writes)/float64(b.N), "pagewrites/op")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// pageWrites is how many pages the store's file has had written: its commits' disk work.
func pageWrites(s *boltstore.Store) int64 {
	st := s.DB().Stats()
	return st.TxStats.GetWrite()
}

// cpuTime is the CPU time the process has used, user and system: divided by the replays, the
// work each costs whatever else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
