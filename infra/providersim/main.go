// Command providersim runs the Stripe PaymentIntents simulator alone:
//
//	go run ./infra/providersim [-addr 127.0.0.1:12111] [-data ./.twice] [-webhook-url URL]
//
// TWICE_STRIPE_API_KEY (default sk_test_twice_local) is the accepted API key and
// TWICE_STRIPE_WEBHOOK_SECRET (default whsec_twice_local_dev_secret_do_not_use) signs
// events. State lives in DATA/providersim.db (DATA: -data, else TWICE_DATA_DIR, else
// ./.twice) and survives kill -9.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "providersim:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", stripesim.DefaultAddr, "listen address (keep it on 127.0.0.1)")
	data := flag.String("data", envOr("TWICE_DATA_DIR", "./.twice"), "data directory (default TWICE_DATA_DIR or ./.twice); state lives in "+stripesim.DBFile)
	hook := flag.String("webhook-url", stripesim.DefaultWebhookURL, "where signed events are sent; empty sends none")
	flag.Parse()

	apiKey := envOr("TWICE_STRIPE_API_KEY", stripesim.DefaultAPIKey)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	sim, err := stripesim.New(stripesim.Config{
		DataDir:       *data,
		APIKeys:       []string{apiKey},
		WebhookSecret: envOr("TWICE_STRIPE_WEBHOOK_SECRET", stripesim.DefaultWebhookSecret),
		WebhookURL:    *hook,
		Log:           log,
	})
	if err != nil {
		return err
	}
	defer sim.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	sim.Start(ctx)
	fmt.Printf("providersim: Stripe API on http://%s/v1, controls on http://%s/_sim, webhooks to %s\n", ln.Addr(), ln.Addr(), *hook)
	fmt.Printf("  curl -u %s: http://%s/v1/payment_intents -d amount=1000 -d currency=usd -d payment_method=pm_card_visa -d confirm=true\n",
		apiKey, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = srv.Close() // a held timeout_after_effect request must not block exit
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
