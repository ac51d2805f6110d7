package harness

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestShortRun is the chaos run of the test command: 60 payments, one kill -9, faults and
// webhook replays, lost deliveries and unheard payments (every webhook about them dropped,
// settled at the provider later), manual captures and refunds (some failing later at the
// provider), bounded by ShortConfig's duration. Backfill passes of at
// most 10 events make the backlog take several passes; the unheard payments must end as the
// provider says, and only the backfill can have told the stack.
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
	if rep.Recoveries == nil || rep.Recoverable == 0 {
		t.Fatalf("no recoveries to check: %+v", rep)
	}
	if rep.DroppedDeliveries == 0 {
		t.Fatalf("no delivery was dropped at rate %v: the backfill was not exercised", cfg.DropRate)
	}
	if rep.Unheard == 0 || rep.UnheardSettled == 0 {
		t.Fatalf("%d unheard payments, %d settled at the provider: the plan made nothing only the backfill can bring", rep.Unheard, rep.UnheardSettled)
	}
	if rep.BackfillApplied == 0 || rep.BackfillLongestWalk < 2 {
		t.Fatalf("applied by backfill %d, longest walk %d passes of at most %d events: want > 0 and a backlog larger than one pass",
			rep.BackfillApplied, rep.BackfillLongestWalk, cfg.BackfillMaxEvents)
	}
	// The flows happened, so their invariants above judged something: manual captures and
	// refunds, and refunds that fail later at the provider.
	if f := rep.Flows; rep.Manual == 0 || f.CapturesRequested == 0 || f.Captured == 0 || f.RefundsRequested == 0 ||
		f.RefundsSucceeded == 0 || f.RefundsFailed == 0 || f.CancelsRequested != f.Canceled || f.RefundsPending != 0 {
		t.Fatalf("the flows did not run as planned: manual %d, %+v", rep.Manual, f)
	}
	if rep.ProviderIntents == 0 || rep.Requests == 0 || rep.Unanswered == cfg.Payments {
		t.Fatalf("the run did nothing: %+v", rep)
	}
	if rep.Incomplete != "" {
		// A machine loaded by other work can make the drive outlast its bound; the invariants
		// above held for everything that ran, which is what this test guards.
		t.Logf("incomplete: %s", rep.Incomplete)
		return
	}
	// A payment pending across the clock jump that never reached the provider ends canceled,
	// with no PaymentIntent (the key horizon rule); every other one has exactly one.
	if rep.Recovered != rep.Recoverable {
		t.Fatalf("%d of %d recoverable payments recovered", rep.Recovered, rep.Recoverable)
	}
	if rep.Kills != cfg.Kills || rep.ProviderIntents != cfg.Payments-rep.NeverAtProvider || rep.Requests < int64(3*cfg.Payments) ||
		rep.Faults == 0 || rep.Replays == 0 || rep.Unanswered != 0 {
		t.Fatalf("the run did not do what it says: %+v", rep)
	}
	if !strings.Contains(progress.String(), "settled") {
		t.Fatalf("no progress bar: %q", progress.String())
	}
}
