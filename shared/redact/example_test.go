package redact_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/runtwice/twice/shared/redact"
)

// Text is usable on its own, for log lines and error messages.
func ExampleText() {
	fmt.Println(redact.Text("charge 4242 4242 4242 4242 exp 12/34 with sk_live_51Habc and pi_3Mt_secret_YrKJ"))
	// Output:
	// charge [card ****4242] exp 12/34 with sk_live_[redacted] and pi_3Mt_secret_[redacted]
}

// A Stripe request as the attempt log stores it: headers and body redacted, the card's last
// four digits kept.
func ExampleBody() {
	h := redact.Header(http.Header{"Authorization": {"Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc"},
		"Content-Type": {"application/x-www-form-urlencoded"}})
	fmt.Println(h["Authorization"])
	fmt.Println(redact.Body(h["Content-Type"], []byte("amount=1000&card[number]=4242424242424242&card[cvc]=123")))
	// Output:
	// Bearer [redacted]
	// amount=1000&card[number]=[card+****4242]&card[cvc]=[redacted]
}

// Wrap the process's logger once, at wiring time: every line from every package is redacted.
func ExampleLogHandler() {
	log := slog.New(redact.LogHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})))
	log.Info("key created", "key", "k#local#4242424242424242")
	// Output:
	// level=INFO msg="key created" key="k#local#[card ****4242]"
}
