package chaos

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestShortRun is the chaos run of the test command: 60 payments, one kill -9, faults and
// webhook replays, bounded by ShortConfig's duration.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds infra/local and kills it")
	}
	cfg := ShortConfig(1)
	var progress strings.Builder
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+30*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	if broken := rep.Broken(); len(broken) > 0 {
		t.Fatalf("invariants broken (seed %d): %v", cfg.Seed, broken)
	}
	if rep.Incomplete != "" {
		t.Fatalf("incomplete: %s", rep.Incomplete)
	}
	if rep.Kills != cfg.Kills || rep.Payments != cfg.Payments || rep.ProviderIntents == 0 ||
		rep.Requests < int64(3*cfg.Payments) || rep.Faults == 0 || rep.Replays == 0 || rep.Unanswered == cfg.Payments {
		t.Fatalf("the run did not do what it says: %+v", rep)
	}
	if !strings.Contains(progress.String(), "settled") {
		t.Fatalf("no progress bar: %q", progress.String())
	}
}
