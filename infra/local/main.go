// Command local runs twice in one process: every function behind one HTTP server on
// 127.0.0.1:3000, on an embedded store under ./.twice, with the Stripe simulator on
// 127.0.0.1:12111.
//
//	go run ./infra/local [-addr 127.0.0.1:3000] [-sim-addr 127.0.0.1:12111] [-data ./.twice]
//
// Secrets and keys come from TWICE_STRIPE_WEBHOOK_SECRET, TWICE_STANDARD_WEBHOOK_SECRET,
// TWICE_OPERATOR_TOKEN and TWICE_STRIPE_API_KEY, with local defaults that are not real secrets.
package main

import (
	"expvar"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runtwice/twice/infra/inprocess"
	"github.com/runtwice/twice/shared/boltstore"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "twice:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDefault := inprocess.DefaultDataDir
	if d := os.Getenv("TWICE_DATA_DIR"); d != "" {
		dataDefault = d
	}
	cfg := inprocess.Config{
		StripeWebhookSecret:   os.Getenv("TWICE_STRIPE_WEBHOOK_SECRET"),
		StandardWebhookSecret: os.Getenv("TWICE_STANDARD_WEBHOOK_SECRET"),
		OperatorToken:         os.Getenv("TWICE_OPERATOR_TOKEN"),
		StripeAPIKey:          os.Getenv("TWICE_STRIPE_API_KEY"),
	}
	fs.StringVar(&cfg.Addr, "addr", inprocess.DefaultAddr, "API address")
	fs.StringVar(&cfg.SimAddr, "sim-addr", inprocess.DefaultSimAddr, "provider simulator address")
	fs.StringVar(&cfg.DataDir, "data", dataDefault, "data directory (or TWICE_DATA_DIR)")
	fs.Float64Var(&cfg.TimeFactor, "time-factor", 1, "run payment recovery's clock this many times faster (recovery demos)")
	fs.Func("clock-start", "start the stack's clocks at this RFC 3339 instant instead of now, e.g. 2026-03-02T10:00:00Z (testing and demos; kept with the data directory)",
		func(v string) (err error) {
			cfg.ClockStart, err = time.Parse(time.RFC3339, v)
			return err
		})
	fs.DurationVar(&cfg.ProviderTimeout, "provider-timeout", 3*time.Second, "timeout of one provider call")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 29*time.Second, "deadline of one API request (API Gateway's is 29 s)")
	fs.DurationVar(&cfg.ResolveDelay, "resolve-delay", 2*time.Second, "wait before resolving an unknown outcome in the background")
	fs.DurationVar(&cfg.CaptureWindow, "capture-window", 0, "report an authorization still uncaptured after this long (default 6 days; testing)")
	fs.IntVar(&cfg.BackfillMaxEvents, "backfill-max-events", 0, "events one backfill pass handles at most (default 50000); a longer backlog continues next pass")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 10*time.Second, "deadline for reading a whole request, headers and body")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", 0, "deadline from a request's headers to the end of its answer (default request-timeout + 10s)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 60*time.Second, "close a keep-alive connection idle this long")
	fs.Float64Var(&cfg.Throttle, "throttle", 0, "refuse this share (0 to 1) of the calls to the store, queues, runner, event feed and provider as the services refuse a throttled call (testing)")
	trimAbove := fs.Int64("trim-above", boltstore.TrimAbove>>20, "drop the data files' pages from resident memory after this many MB of growth; more is faster under load and holds more memory")
	logLevel := fs.String("log", "info", "log level: debug, info, warn, error")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof and expvar's /debug/vars on this loopback address (profiling)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *trimAbove < 1 {
		return fmt.Errorf("-trim-above %d: want at least 1 (MB)", *trimAbove)
	}
	boltstore.TrimAbove = *trimAbove << 20
	if cfg.Throttle < 0 || cfg.Throttle >= 1 {
		return fmt.Errorf("-throttle %v: want a share from 0 up to, not including, 1", cfg.Throttle)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	stack, err := inprocess.New(cfg)
	if err != nil {
		return err
	}
	if *pprofAddr != "" {
		// /debug/vars (expvar) adds the data files' commit counts to the runtime's (bench reads them).
		expvar.Publish("twice_files", expvar.Func(func() any { return stack.Files() }))
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }() // net/http/pprof registers on the default mux
	}
	stack.Start()
	banner(stdout, stack)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Fprintln(stdout, "twice: shutting down")
	return stack.Close()
}

func banner(w io.Writer, s *inprocess.Stack) {
	c := s.Config()
	api := s.APIURL()
	fmt.Fprintf(w, `twice is running locally.

  API                 %[1]s   (POST /payments, GET /payments/{id}, POST /payments/{id}/capture, /cancel, /refunds, POST /webhooks/{provider})
  operator console    %[1]s/ops/   (bearer token: TWICE_OPERATOR_TOKEN)
  provider simulator  %[2]s   (Stripe API subset; /_sim/faults, /_sim/webhooks/replay)
  data                %[3]s

Try a payment:

  curl -s %[1]s/payments -H 'Idempotency-Key: order-1001' -H 'Content-Type: application/json' \
    -d '{"amount":2000,"currency":"usd","customer":"cus_123","payment_method":"pm_card_visa"}'

Run it again: the same answer, with Idempotent-Replayed: true, and one charge at the simulator.
`, api, s.SimURL(), c.DataDir)
}
