package recon

import (
	"fmt"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// BenchmarkClassify compares 10,000 matching pairs (a busy day) with 1% of them diverging.
func BenchmarkClassify(b *testing.B) {
	const n = 10000
	snap := Snapshot{Window: window, Now: t0}
	for i := range n {
		id, pid := fmt.Sprintf("pay_%05d", i), fmt.Sprintf("pi_%05d", i)
		created := old.Add(-time.Duration(i) * time.Second)
		snap.Local = append(snap.Local, loc(id, pid, "succeeded", 100, created))
		amount := int64(100)
		if i%100 == 0 {
			amount = 101
		}
		snap.Remote = append(snap.Remote, rem(pid, provider.StatusSucceeded, amount, created, payID(id)))
	}
	var got []Difference
	for b.Loop() {
		got = Classify(snap, DefaultGrace)
	}
	if len(got) != n/100 {
		b.Fatalf("%d differences, want %d", len(got), n/100)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/payment")
}
