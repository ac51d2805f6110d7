package stripesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestListMatchesModel checks list pagination against a model: for random creation times
// (the clock may stand still or go back) and random filters, walking the pages with
// starting_after yields exactly the matching intents, newest first, each once; walking
// back with ending_before from the end yields the same set.
func TestListMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := newClock()
		sim, err := New(Config{DataDir: t.TempDir(), Now: clock.Now, NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer sim.Close()
		type row struct {
			id       string
			created  int64
			customer string
		}
		var model []row
		n := rapid.IntRange(0, 40).Draw(rt, "n")
		for i := range n {
			clock.Advance(time.Duration(rapid.IntRange(-2, 3).Draw(rt, "step")) * time.Second)
			cust := rapid.SampledFrom([]string{"cus_a", "cus_b"}).Draw(rt, "customer")
			code, body := serve(sim, http.MethodPost, "/v1/payment_intents",
				url.Values{"amount": {"1"}, "currency": {"usd"}, "customer": {cust}}.Encode())
			if code != 200 {
				rt.Fatalf("create %d: %d %s", i, code, body)
			}
			var pi PaymentIntent
			_ = json.Unmarshal(body, &pi)
			model = append(model, row{id: pi.ID, created: pi.Created, customer: cust})
		}
		base := clock.Now().Unix()
		q := url.Values{}
		limit := rapid.IntRange(1, 7).Draw(rt, "limit")
		q.Set("limit", fmt.Sprint(limit))
		lo, hi := int64(-1<<62), int64(1<<62)
		if rapid.Bool().Draw(rt, "gte") {
			lo = base + int64(rapid.IntRange(-60, 5).Draw(rt, "gteOff"))
			q.Set("created[gte]", fmt.Sprint(lo))
		}
		if rapid.Bool().Draw(rt, "lt") {
			v := base + int64(rapid.IntRange(-60, 5).Draw(rt, "ltOff"))
			q.Set("created[lt]", fmt.Sprint(v))
			hi = v - 1
		}
		cust := rapid.SampledFrom([]string{"", "cus_a", "cus_b"}).Draw(rt, "filterCustomer")
		if cust != "" {
			q.Set("customer", cust)
		}
		var want []string
		slices.SortFunc(model, func(a, b row) int {
			return cmp.Or(cmp.Compare(b.created, a.created), strings.Compare(b.id, a.id))
		})
		for _, r := range model {
			if r.created >= lo && r.created <= hi && (cust == "" || r.customer == cust) {
				want = append(want, r.id)
			}
		}
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			if page > 100 {
				rt.Fatal("pagination does not end")
			}
			pq := url.Values{}
			for k, v := range q {
				pq[k] = v
			}
			if cursor != "" {
				pq.Set("starting_after", cursor)
			}
			ids, more := listPage(rt, sim, pq)
			got = append(got, ids...)
			if len(ids) > limit || (more && len(ids) != limit) {
				rt.Fatalf("page of %d with has_more=%v and limit %d", len(ids), more, limit)
			}
			if !more {
				break
			}
			cursor = ids[len(ids)-1]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("forward:\n got %v\nwant %v", got, want)
		}
		if len(want) < 2 {
			return
		}
		// Backwards from the oldest match: everything newer, in the same order.
		pq := url.Values{}
		for k, v := range q {
			pq[k] = v
		}
		pq.Set("ending_before", want[len(want)-1])
		pq.Set("limit", "100")
		back, _ := listPage(rt, sim, pq)
		if fmt.Sprint(back) != fmt.Sprint(want[:len(want)-1]) {
			rt.Fatalf("ending_before:\n got %v\nwant %v", back, want[:len(want)-1])
		}
	})
}

func serve(sim *Simulator, method, path, body string) (int, []byte) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.SetBasicAuth(DefaultAPIKey, "")
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func listPage(rt *rapid.T, sim *Simulator, q url.Values) ([]string, bool) {
	code, body := serve(sim, http.MethodGet, "/v1/payment_intents?"+q.Encode(), "")
	var page struct {
		Data    []PaymentIntent `json:"data"`
		HasMore bool            `json:"has_more"`
	}
	if code != 200 || json.Unmarshal(body, &page) != nil {
		rt.Fatalf("list %s: %d %s", q.Encode(), code, body)
	}
	ids := []string{}
	for _, pi := range page.Data {
		ids = append(ids, pi.ID)
	}
	return ids, page.HasMore
}
