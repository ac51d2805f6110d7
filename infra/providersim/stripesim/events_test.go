package stripesim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// listEvents lists through stripe-go's V1Events.List (auto-pagination).
func listEvents(t *testing.T, h *harness, p *stripe.EventListParams) []*stripe.Event {
	t.Helper()
	var out []*stripe.Event
	for ev, err := range h.client.V1Events.List(context.Background(), p) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestEventListThroughStripeGo: GET /v1/events lists newest first, pages with limit and
// starting_after (stripe-go's auto-pagination crosses pages), filters by type, types (with a
// wildcard), created and delivery_success; dropped events are the undelivered ones.
func TestEventListThroughStripeGo(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if st, b := h.control(t, "POST", "/_sim/webhooks/drop", map[string]any{"count": 2}); st != 200 {
		t.Fatalf("drop: %d %s", st, b)
	}
	var ids []string
	for i := range 5 {
		pi, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "ev-"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pi.ID)
		h.clock.Advance(10 * time.Second)
	}
	if _, err := h.client.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(ids[0]), Amount: stripe.Int64(500)}); err != nil {
		t.Fatal(err)
	}
	if st, b := h.control(t, "POST", "/_sim/payment_intents/"+ids[1]+"/dispute", map[string]any{"status": "needs_response"}); st != 200 {
		t.Fatalf("dispute: %d %s", st, b)
	}
	if _, err := h.sim.Deliver(ctx); err != nil {
		t.Fatal(err)
	}

	p := &stripe.EventListParams{}
	p.Limit = stripe.Int64(2) // three pages: auto-pagination follows starting_after
	all := listEvents(t, h, p)
	if len(all) != 8 {
		t.Fatalf("%d events, want 8 (5 successes, a refund's charge.refunded and refund.created, a dispute)", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("not newest first: %s then %s", all[i-1].ID, all[i].ID)
		}
	}
	if all[0].Type != "charge.dispute.created" || all[1].Type != "refund.created" || all[2].Type != "charge.refunded" {
		t.Fatalf("newest: %s, %s, %s", all[0].Type, all[1].Type, all[2].Type)
	}
	var d struct {
		PaymentIntent   string `json:"payment_intent"`
		EvidenceDetails struct {
			DueBy int64 `json:"due_by"`
		} `json:"evidence_details"`
	}
	if json.Unmarshal(all[0].Data.Raw, &d) != nil || d.PaymentIntent != ids[1] || d.EvidenceDetails.DueBy == 0 {
		t.Fatalf("dispute object: %s", all[0].Data.Raw)
	}

	cases := map[string]struct {
		params func(*stripe.EventListParams)
		want   int
	}{
		"type": {func(p *stripe.EventListParams) { p.Type = stripe.String("payment_intent.succeeded") }, 5},
		"types": {func(p *stripe.EventListParams) {
			p.Types = stripe.StringSlice([]string{"charge.refunded", "charge.dispute.created"})
		}, 2},
		"wildcard":    {func(p *stripe.EventListParams) { p.Type = stripe.String("charge.*") }, 2},
		"undelivered": {func(p *stripe.EventListParams) { p.DeliverySuccess = stripe.Bool(false) }, 2},
		"delivered":   {func(p *stripe.EventListParams) { p.DeliverySuccess = stripe.Bool(true) }, 6},
		"created[gte/lte]": {func(p *stripe.EventListParams) {
			p.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: all[5].Created, LesserThanOrEqual: all[3].Created}
		}, 3},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := &stripe.EventListParams{}
			c.params(p)
			if got := listEvents(t, h, p); len(got) != c.want {
				t.Fatalf("%d events, want %d", len(got), c.want)
			}
		})
	}

	// ending_before walks toward newer events: stripe-go reverses each page and pages on from
	// its newest, so the sequence runs oldest first across pages (the backfill's cursor walk),
	// with created and delivery filters applied after the cursor.
	p = &stripe.EventListParams{}
	p.Limit = stripe.Int64(2)
	p.EndingBefore = stripe.String(all[6].ID)
	up := listEvents(t, h, p)
	if len(up) != 6 {
		t.Fatalf("after the oldest: %d events, want 6", len(up))
	}
	for i, ev := range up {
		if ev.ID != all[5-i].ID {
			t.Fatalf("ending_before walk %d: %s, want %s (oldest first)", i, ev.ID, all[5-i].ID)
		}
	}
	p = &stripe.EventListParams{}
	p.Limit = stripe.Int64(2)
	p.EndingBefore = stripe.String(all[6].ID)
	p.Type = stripe.String("charge.*")
	if got := listEvents(t, h, p); len(got) != 2 || got[0].Type != "charge.refunded" {
		t.Fatalf("ending_before with a filter: %d events", len(got))
	}

	// One page by hand: has_more, and starting_after an unknown id is Stripe's 400.
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/events?limit=3", nil)
	req.SetBasicAuth(DefaultAPIKey, "")
	st, _, body := do(t, req)
	var page struct {
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if st != 200 || json.Unmarshal(body, &page) != nil || len(page.Data) != 3 || !page.HasMore {
		t.Fatalf("page: %d %s", st, body)
	}
	for q, want := range map[string]int{"starting_after=evt_nope": 400, "ending_before=evt_nope": 400, "limit=101": 400, "delivery_success=maybe": 400, "colour=red": 400} {
		req, _ := http.NewRequest("GET", h.srv.URL+"/v1/events?"+q, nil)
		req.SetBasicAuth(DefaultAPIKey, "")
		if st, _, body := do(t, req); st != want {
			t.Errorf("%s: %d %s", q, st, body)
		}
	}
}

// TestDropRateIsSeeded: {"rate":R,"seed":S} drops the same events on every run with the same
// seed, about R of them, and another seed drops others.
func TestDropRateIsSeeded(t *testing.T) {
	run := func(seed int) []string {
		h := newHarness(t)
		if st, b := h.control(t, "POST", "/_sim/webhooks/drop", map[string]any{"rate": 0.3, "seed": seed}); st != 200 {
			t.Fatalf("drop: %d %s", st, b)
		}
		for i := range 200 {
			if _, err := h.client.V1PaymentIntents.Create(context.Background(), stripeCreate("pm_card_visa", "rate-"+url.QueryEscape(string(rune(0x100+i))))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.sim.Deliver(context.Background()); err != nil {
			t.Fatal(err)
		}
		p := &stripe.EventListParams{DeliverySuccess: stripe.Bool(false)}
		var ids []string
		for _, ev := range listEvents(t, h, p) {
			ids = append(ids, ev.ID)
		}
		return ids
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed dropped other events")
	}
	if slices.Equal(a, c) {
		t.Fatal("another seed dropped the same events")
	}
	if len(a) < 40 || len(a) > 80 {
		t.Fatalf("%d of 200 dropped at rate 0.3", len(a))
	}
	h := newHarness(t)
	for _, body := range []map[string]any{{"rate": 1.5}, {"rate": -0.1}, {"count": -1}} {
		if st, _ := h.control(t, "POST", "/_sim/webhooks/drop", body); st != 400 {
			t.Errorf("%v: %d, want 400", body, st)
		}
	}
}

// TestDropByCustomer: {"customers":[...]} drops every event about those customers' payments,
// from the first to the settle, and a replay of them sends nothing; another customer's events
// are delivered, and the log lists the dropped ones as undelivered.
func TestDropByCustomer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if st, b := h.control(t, "POST", "/_sim/webhooks/drop", map[string]any{"customers": []string{"cus_unheard"}}); st != 200 {
		t.Fatalf("drop: %d %s", st, b)
	}
	if st, b := h.control(t, "POST", "/_sim/cards", map[string]any{"payment_method": "pm_slow", "processing": true}); st != 200 {
		t.Fatalf("card: %d %s", st, b)
	}
	unheard := stripeCreate("pm_slow", "unheard")
	unheard.Customer = stripe.String("cus_unheard")
	slow, err := h.client.V1PaymentIntents.Create(ctx, unheard)
	if err != nil || slow.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("processing: %+v %v", slow, err)
	}
	heard, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "heard"))
	if err != nil {
		t.Fatal(err)
	}
	if st, b := h.control(t, "POST", "/_sim/payment_intents/"+slow.ID+"/settle", map[string]any{"outcome": "succeeded"}); st != 200 {
		t.Fatalf("settle: %d %s", st, b)
	}
	if _, err := h.sim.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	undelivered := listEvents(t, h, &stripe.EventListParams{DeliverySuccess: stripe.Bool(false)})
	if len(undelivered) != 2 {
		t.Fatalf("%d undelivered events, want the unheard payment's 2", len(undelivered))
	}
	for _, ev := range undelivered {
		if id, _ := ev.Data.Object["id"].(string); id != slow.ID {
			t.Fatalf("undelivered %s about %s, want only %s's", ev.Type, id, slow.ID)
		}
	}
	st, b := h.control(t, "POST", "/_sim/webhooks/replay", map[string]any{"event_id": undelivered[0].ID, "times": 2, "shuffle": true})
	if st != 202 || !strings.Contains(string(b), `"event_ids":[]`) {
		t.Fatalf("replay of an unheard event: %d %s", st, b)
	}
	if _, err := h.sim.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.hooks.got()
	if len(got) != 1 || got[0].Data.Object["id"] != heard.ID {
		t.Fatalf("delivered %d events, want only the other customer's one", len(got))
	}
	for _, body := range []map[string]any{{"customers": []string{"acct_1"}}, {"customers": []string{""}}} {
		if st, _ := h.control(t, "POST", "/_sim/webhooks/drop", body); st != 400 {
			t.Errorf("%v: %d, want 400", body, st)
		}
	}
}

// TestCancelAndDispute: cancel sends payment_intent.canceled and refuses a succeeded intent;
// a dispute goes created, updated, closed, and a closed one takes no more changes.
func TestCancelAndDispute(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if st, b := h.control(t, "POST", "/_sim/cards", map[string]any{"payment_method": "pm_slow", "processing": true}); st != 200 {
		t.Fatalf("card: %d %s", st, b)
	}
	slow, err := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_slow", "slow"))
	if err != nil || slow.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("processing: %+v %v", slow, err)
	}
	cp := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("abandoned")}
	if pi, err := h.client.V1PaymentIntents.Cancel(ctx, slow.ID, cp); err != nil || pi.Status != stripe.PaymentIntentStatusCanceled {
		t.Fatalf("cancel: %+v %v", pi, err)
	}
	paid, _ := h.client.V1PaymentIntents.Create(ctx, stripeCreate("pm_card_visa", "paid"))
	if _, err := h.client.V1PaymentIntents.Cancel(ctx, paid.ID, nil); err == nil {
		t.Fatal("a succeeded intent was canceled")
	}
	for _, st := range []string{"needs_response", "under_review", "won"} {
		if code, b := h.control(t, "POST", "/_sim/payment_intents/"+paid.ID+"/dispute", map[string]any{"status": st}); code != 200 {
			t.Fatalf("dispute %s: %d %s", st, code, b)
		}
	}
	if code, _ := h.control(t, "POST", "/_sim/payment_intents/"+paid.ID+"/dispute", map[string]any{"status": "lost"}); code != 400 {
		t.Fatalf("a closed dispute changed: %d", code)
	}
	if code, _ := h.control(t, "POST", "/_sim/payment_intents/"+slow.ID+"/dispute", nil); code != 400 {
		t.Fatalf("a canceled intent was disputed: %d", code)
	}
	_, _ = h.sim.Deliver(ctx)
	var types []string
	for _, ev := range byID(h.hooks.got()) {
		types = append(types, string(ev.Type))
	}
	want := []string{"payment_intent.processing", "payment_intent.canceled", "payment_intent.succeeded",
		"charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}
