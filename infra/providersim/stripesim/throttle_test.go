package stripesim

import (
	"net/url"
	"strings"
	"testing"
)

// TestThrottleRate: with ThrottleRate, that share of API requests is answered as Stripe
// answers past a rate limit (429 rate_limit, Retry-After: 1) and applies nothing; the rest are
// served. The draw comes from Config.Rand, so the same seed throttles the same requests.
func TestThrottleRate(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ThrottleRate = 0.5 })
	throttled, served := 0, 0
	for range 40 {
		st, hd, b := h.post(t, "/v1/payment_intents", "", url.Values{"amount": {"1"}, "currency": {"usd"}})
		switch {
		case st == 429 && hd.Get("Retry-After") == "1" && strings.Contains(string(b), `"code":"rate_limit"`):
			throttled++
		case st == 200:
			served++
		default:
			t.Fatalf("%d %v %s", st, hd, b)
		}
	}
	stats, err := h.sim.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if throttled == 0 || served == 0 || stats.PaymentIntents != served {
		t.Fatalf("%d throttled, %d served, %d PaymentIntents: want both kinds, one PaymentIntent per served request",
			throttled, served, stats.PaymentIntents)
	}
}
