package stripesim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// The Search API as stripe-go calls it: exact metadata matches, oldest first, capped by limit;
// any other query is refused like Stripe refuses a query it cannot parse.
func TestSearchByMetadata(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i, id := range []string{"pay_a", "pay_b", "pay_a"} {
		p := stripeCreate("pm_card_visa", "search-"+string(rune('0'+i)))
		p.Metadata = map[string]string{"twice_payment_id": id}
		if _, err := h.client.V1PaymentIntents.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
	}
	search := func(q string) []*stripe.PaymentIntent {
		t.Helper()
		params := &stripe.PaymentIntentSearchParams{}
		params.Query = q
		var out []*stripe.PaymentIntent
		for pi, err := range h.client.V1PaymentIntents.Search(ctx, params) {
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			out = append(out, pi)
		}
		return out
	}
	if got := search("metadata['twice_payment_id']:'pay_a'"); len(got) != 2 || got[0].Created > got[1].Created {
		t.Fatalf("pay_a: %d results", len(got))
	}
	if got := search("metadata['twice_payment_id']:'pay_c'"); len(got) != 0 {
		t.Fatalf("pay_c: %d results", len(got))
	}
	for _, bad := range []string{"status:'succeeded'", "metadata['k']:'a' OR metadata['k']:'b'", "metadata['k']:'a\\''", ""} {
		req, _ := http.NewRequest("GET", h.srv.URL+"/v1/payment_intents/search?query="+url.QueryEscape(bad), nil)
		req.SetBasicAuth(DefaultAPIKey, "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("query %q: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// POST /_sim/idempotency/expire forgets keys at least older_than_s old: a create re-sent under
// a forgotten key creates a second PaymentIntent, as at Stripe after 24 h; a younger key still
// replays.
func TestExpireIdempotencyKeys(t *testing.T) {
	h := newHarness(t)
	form := url.Values{"amount": {"5"}, "currency": {"usd"}}
	_, _, old := h.post(t, "/v1/payment_intents", "old", form)
	h.clock.Advance(2 * time.Hour)
	_, _, young := h.post(t, "/v1/payment_intents", "young", form)
	expire := func(body string) (int, string) {
		resp, err := http.Post(h.srv.URL+"/_sim/idempotency/expire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, b := expire(`{"older_than_s":3600}`); st != 200 || !strings.Contains(b, `"expired":1`) {
		t.Fatalf("expire: %d %s", st, b)
	}
	_, hd, again := h.post(t, "/v1/payment_intents", "old", form)
	if hd.Get("Idempotent-Replayed") != "" || bytes.Equal(again, old) {
		t.Fatal("a forgotten key replayed")
	}
	_, hd, y2 := h.post(t, "/v1/payment_intents", "young", form)
	if hd.Get("Idempotent-Replayed") != "true" || !bytes.Equal(y2, young) {
		t.Fatal("a young key was forgotten")
	}
	if st, b := expire(`{"older_than_s":0}`); st != 200 || !strings.Contains(b, `"expired":2`) {
		t.Fatalf("expire all: %d %s", st, b)
	}
	for _, bad := range []string{`{"older_than_s":-1}`, `{"older_than_s":"x"}`, `{"other":1}`, `[`} {
		if st, b := expire(bad); st != 400 || !json.Valid([]byte(b)) {
			t.Fatalf("%s: %d %s", bad, st, b)
		}
	}
}

// FuzzSearchQuery: the search route's query parser accepts exactly one metadata clause of safe
// characters and never panics.
func FuzzSearchQuery(f *testing.F) {
	for _, s := range []string{"metadata['twice_payment_id']:'pay_1'", "metadata['a']:'b' AND x", "status:'x'", "metadata['']:''", "metadata['a']:'\\''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		m := searchQuery.FindStringSubmatch(q)
		if m == nil {
			return
		}
		if strings.ContainsAny(m[1]+m[2], "'\\ ") || q != "metadata['"+m[1]+"']:'"+m[2]+"'" {
			t.Fatalf("accepted %q as %q", q, m)
		}
	})
}

// A fault armed on /v1/payment_intents/search hits searches only; creates go through.
func TestFaultOnSearchOnly(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Post(h.srv.URL+"/_sim/faults", "application/json",
		strings.NewReader(`{"path_prefix":"/v1/payment_intents/search","fault":"http_500","count":1}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("arm: %v %v", resp, err)
	}
	resp.Body.Close()
	if st, _, _ := h.post(t, "/v1/payment_intents", "k1", url.Values{"amount": {"5"}, "currency": {"usd"}}); st != 200 {
		t.Fatalf("create under a search fault: %d", st)
	}
	search := func() int {
		req, _ := http.NewRequest("GET", h.srv.URL+"/v1/payment_intents/search?query="+url.QueryEscape("metadata['a']:'b'"), nil)
		req.SetBasicAuth(DefaultAPIKey, "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if first, second := search(), search(); first != 500 || second != 200 {
		t.Fatalf("searches answered %d then %d, want 500 then 200", first, second)
	}
}
