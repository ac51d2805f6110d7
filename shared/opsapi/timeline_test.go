package opsapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/opsapi"
)

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 ms", 850 * time.Microsecond: "850 µs", 3299346 * time.Nanosecond: "3.3 ms", 120 * time.Millisecond: "120 ms",
		1200 * time.Millisecond: "1.2 s", 42 * time.Second: "42 s", 125 * time.Second: "2 min 5 s",
		3*time.Hour + 12*time.Minute: "3 h 12 min", 52 * time.Hour: "2 d 4 h",
	} {
		if got := opsapi.HumanDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

func TestMoney(t *testing.T) {
	for _, c := range []struct {
		amount int64
		cur    string
		want   string
	}{{2500, "usd", "25.00 USD"}, {5, "eur", "0.05 EUR"}, {1000, "jpy", "1000 JPY"}, {-150, "gbp", "-1.50 GBP"}} {
		if got := opsapi.Money(c.amount, c.cur); got != c.want {
			t.Errorf("%d %s: %q, want %q", c.amount, c.cur, got, c.want)
		}
	}
}

func TestTimelineAndLookupErrors(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]int{
		"/ops/payments/pay_nope/timeline":                                                    404, // no payment reader configured: not found
		"/ops/attempts?payment_id=a&event_id=b":                                              400,
		"/ops/attempts?idempotency_key=" + strings.Repeat("k", 300):                          400,
		"/ops/attempts?provider_payment_id=pi_1":                                             200,
		"/ops/attempts?invoice=in_1":                                                         200,
		"/ops/attempts?idempotency_key=k&scope=" + url.QueryEscape(strings.Repeat("s", 300)): 400,
	} {
		resp, body := f.do(t, "GET", path, "", true)
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
		if want != 200 && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %s is not problem+json", path, resp.Header.Get("Content-Type"))
		}
	}
}

func FuzzParseLookup(f *testing.F) {
	f.Add("idempotency_key=order-1&scope=local")
	f.Add("payment_id=pay_1&event_id=evt_1")
	f.Add("invoice=%00&provider_payment_id=pi_1")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		by, value, err := opsapi.ParseLookup(q)
		if err != nil {
			if !utf8.ValidString(err.Error()) || len(err.Error()) > 300 {
				t.Fatalf("error text: %q", err)
			}
			return
		}
		if value == "" || len(value) > 255 || q.Get(string(by)) != value {
			t.Fatalf("%q -> %s %q", raw, by, value)
		}
	})
}

func TestConsoleListSortsAndTimelinePage(t *testing.T) {
	f := newFixture(t)
	c := consoleClient(t, f)
	for _, k := range []string{"age", "amount", "customer", "status", "class", "bogus"} {
		for _, order := range []string{"", "desc"} {
			code, body := get(t, c, f.srv.URL+"/ops/?sort="+k+"&order="+order)
			if code != 200 || !strings.Contains(body, f.record.ID) || !strings.Contains(body, `aria-label="Sort"`) {
				t.Errorf("sort %s %s: %d", k, order, code)
			}
		}
	}
	// No payment reader in this fixture: the page says so, as a page, not a panic.
	if code, body := get(t, c, f.srv.URL+"/ops/payments/pay_x"); code != 404 || !strings.Contains(body, "not configured") {
		t.Errorf("timeline page without payments: %d", code)
	}
}
