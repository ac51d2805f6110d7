// Command chaos drives the local stack with duplicated payments, simulator faults, webhook
// replays, lost webhook deliveries and kill -9 restarts, then checks against the simulator's own
// records that no payment was charged twice or lost, that every replay answered the same, and
// that after the backfill walked the provider's event log local state equals the provider's,
// the unheard payments (settled at the provider with every webhook about them dropped)
// included, and that manual captures, cancels and refunds (some failing later at the
// provider) never refund more than was captured, make one provider refund per key and end as
// the provider has them, every authorization captured, canceled or surfaced. It builds infra/local and runs it on free loopback ports over a fresh data
// directory; the run is bounded by -duration.
//
//	go run ./infra/chaos [-payments 1000] [-kills 3] [-seed 1] [-short] [-json chaos.json]
//	                     [-drop-rate 0.2] [-backfill-max-events 50]
//
// It exits 1 when an invariant breaks, 2 when the run could not be made or ended incomplete.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runtwice/twice/infra/chaos/harness"
)

func main() {
	os.Exit(run())
}

func run() int {
	def := harness.NewConfig(1)
	payments := flag.Int("payments", def.Payments, "logical payments")
	seed := flag.Uint64("seed", 1, "seed of the plan: keys, bodies, cards, waves, kill points, faults")
	kills := flag.Int("kills", def.Kills, "kill -9 and restart the stack this many times")
	concurrency := flag.Int("concurrency", def.Concurrency, "logical payments in flight")
	duration := flag.Duration("duration", def.Duration, "hard bound of the run; it reports even if incomplete")
	short := flag.Bool("short", false, "a quick run: 60 payments, one kill, about a minute")
	jsonOut := flag.String("json", "", "write the report to this file as JSON")
	data := flag.String("data", "", "keep the stack's data (and stack.log) in this directory")
	bin := flag.String("bin", "", "a built infra/local to run instead of building one")
	dropRate := flag.Float64("drop-rate", def.DropRate, "share of webhook deliveries the simulator loses (the backfill must bring them); every delivery about the plan's unheard payments is lost whatever the rate")
	backfillMax := flag.Int("backfill-max-events", def.BackfillMaxEvents, "events one backfill pass of the stack handles at most, so a walk takes several passes (0: the stack's default, 50000)")
	throttle := flag.Float64("throttle", 0, "share (0 to 1) of the stack's calls to its store, queues, runner, event feed and provider refused as the services refuse a throttled call")
	flag.Parse()

	if *throttle < 0 || *throttle >= 1 {
		fmt.Fprintf(os.Stderr, "chaos: -throttle %v: want a share from 0 up to, not including, 1\n", *throttle)
		return 2
	}
	cfg := harness.NewConfig(*seed)
	if *short {
		cfg = harness.ShortConfig(*seed)
	}
	// Flags given explicitly win over -short's values.
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "payments":
			cfg.Payments = *payments
		case "kills":
			cfg.Kills = *kills
		case "concurrency":
			cfg.Concurrency = *concurrency
		case "duration":
			cfg.Duration = *duration
		case "drop-rate":
			cfg.DropRate = *dropRate
		case "backfill-max-events":
			cfg.BackfillMaxEvents = *backfillMax
		case "throttle":
			cfg.Throttle = *throttle
		}
	})
	cfg.DataDir, cfg.Bin, cfg.Progress = *data, *bin, os.Stderr
	// Without -data the stack's data goes to a temporary directory that is kept when the run
	// breaks an invariant or ends incomplete, so the evidence (stack.log, the executions'
	// histories in twice.db, the simulator's records) outlives the run.
	keep := true
	if cfg.DataDir == "" {
		d, err := os.MkdirTemp("", "twice-chaos-data")
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
		cfg.DataDir, keep = d, false
		defer func() {
			if keep {
				fmt.Fprintln(os.Stderr, "chaos: the stack's data is kept in", d)
			} else {
				os.RemoveAll(d)
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "chaos: seed %d, %d payments, %d kills, throttle %g, at most %s\n", cfg.Seed, cfg.Payments, cfg.Kills, cfg.Throttle, cfg.Duration)
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	rep.WriteTable(os.Stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
	}
	keep = keep || len(rep.Broken()) > 0 || rep.Incomplete != ""
	if broken := rep.Broken(); len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "chaos: INVARIANTS BROKEN (seed %d): %v\n", cfg.Seed, broken)
		return 1
	}
	if rep.Incomplete != "" {
		fmt.Fprintln(os.Stderr, "chaos: incomplete:", rep.Incomplete)
		return 2
	}
	fmt.Fprintf(os.Stderr, "chaos: every invariant held in %s\n", time.Duration(rep.Seconds*float64(time.Second)).Round(time.Millisecond))
	return 0
}
