package inprocess

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/payments"
)

// consumer reads the event feed the way a downstream system would: from its cursor, and it
// keeps the cursor across its own restarts and the stack's.
type consumer struct {
	cursor string
	seen   map[string][]feed.Event // by payment
	ids    map[string]bool
}

func newConsumer() *consumer {
	return &consumer{seen: map[string][]feed.Event{}, ids: map[string]bool{}}
}

// poll reads one page (waiting up to wait seconds); it reports how many events came. A
// transport error (the stack was killed) is no event.
func (c *consumer) poll(t *testing.T, apiURL string, wait int) int {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/events?after=%s&wait=%d&limit=50", apiURL, c.cursor, wait), nil)
	req.Header.Set("Authorization", "Bearer "+DefaultOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %d", resp.StatusCode)
	}
	var page struct {
		Events []feed.Event `json:"events"`
		Next   string       `json:"next"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return 0 // cut off by a kill
	}
	for _, ev := range page.Events {
		if c.ids[ev.ID] {
			t.Fatalf("change %s seen twice", ev.ID)
		}
		c.ids[ev.ID] = true
		c.seen[ev.PaymentID] = append(c.seen[ev.PaymentID], ev)
	}
	c.cursor = page.Next
	return len(page.Events)
}

// check asserts each payment's changes came as sequences 1..n with rising versions, the last
// one the payment as the API shows it now.
func (c *consumer) check(t *testing.T, apiURL string, ids []string) {
	t.Helper()
	for _, id := range ids {
		evs := c.seen[id]
		if len(evs) == 0 {
			t.Fatalf("no change of %s on the feed", id)
		}
		for i, ev := range evs {
			if ev.Sequence != int64(i+1) || (i > 0 && ev.Version <= evs[i-1].Version) {
				t.Fatalf("%s: change %d has sequence %d version %d (after %d)", id, i, ev.Sequence, ev.Version, evs[max(i-1, 0)].Version)
			}
		}
		var v payments.View
		a := call(t, "GET", apiURL+"/payments/"+id, "", "")
		if err := json.Unmarshal([]byte(a.body), &v); err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1].Payment
		if last.Status != v.Status || last.AmountRefunded != v.AmountRefunded {
			t.Fatalf("%s: the feed's last change says %s refunded %d, the payment is %s refunded %d", id, last.Status, last.AmountRefunded, v.Status, v.AmountRefunded)
		}
	}
}

// TestFeedCarriesEveryChangeInOrder: a payment, two partial refunds: its changes come out as
// sequences 1, 2, 3 (succeeded, succeeded with 1000 refunded, refunded), once each; a long poll
// with nothing new answers empty at its wait, and a bad cursor is a 400.
func TestFeedCarriesEveryChangeInOrder(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1})
	v := succeeded(t, s, "feed-1")
	c := newConsumer()
	// Each refund waits for the change before it: the two charge.refunded events may reach the
	// worker in either order, and the older one is then stale (the payment already holds the
	// newer state), so only two changes would be applied and published.
	for i, amount := range []string{"1000", "1500"} {
		if a := stripeCall(t, s, "POST", "/v1/refunds", "payment_intent="+deref(v.ProviderPaymentID)+"&amount="+amount); a.status != 200 {
			t.Fatalf("refund: %d %s", a.status, a.body)
		}
		want := i + 2
		eventually(t, 20*time.Second, fmt.Sprintf("%d changes on the feed", want), func() bool {
			c.poll(t, s.APIURL(), 1)
			return len(c.seen[v.ID]) >= want
		})
	}
	var got []string
	for _, ev := range c.seen[v.ID] {
		got = append(got, fmt.Sprintf("%d:%s:%d", ev.Sequence, ev.Type, ev.Payment.AmountRefunded))
	}
	if fmt.Sprint(got) != "[1:payment.succeeded:0 2:payment.succeeded:1000 3:payment.refunded:2500]" {
		t.Fatalf("changes %v", got)
	}
	c.check(t, s.APIURL(), []string{v.ID})
	start := time.Now()
	if n := c.poll(t, s.APIURL(), 1); n != 0 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("an empty long poll answered %d events after %s", n, time.Since(start))
	}
	if a := ops(t, s, "GET", "/events?after=x1", ""); a.status != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d %s", a.status, a.body)
	}
}

// TestFeedSurvivesKill9: payments and refunds while the stack is killed with SIGKILL again and
// again; a consumer that resumes from its cursor sees every change exactly once, in order per
// payment, and the last one is each payment's state.
func TestFeedSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	p := startProcess(t, t.TempDir())
	c := newConsumer()
	var ids []string
	for round := range 4 {
		for i := range 5 {
			a := retryPOST(t, "http://"+p.apiAddr()+"/payments", fmt.Sprintf("feed-kill-%d-%d", round, i), paymentBody("pm_card_visa"))
			var v payments.View
			if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.ProviderPaymentID == nil {
				t.Fatalf("payment: %d %s", a.status, a.body)
			}
			ids = append(ids, v.ID)
			form := "payment_intent=" + *v.ProviderPaymentID
			if i%2 == 0 {
				form += "&amount=700"
			}
			if a := stripeCall(t, p.stack(), "POST", "/v1/refunds", form); a.status != 200 {
				t.Fatalf("refund: %d %s", a.status, a.body)
			}
		}
		c.poll(t, "http://"+p.apiAddr(), 0)
		p.kill() // mid-flight: webhooks queued, outbox messages not yet relayed
		p.start()
	}
	var waiting []string
	defer func() {
		if t.Failed() {
			for _, id := range waiting {
				a := call(t, "GET", "http://"+p.apiAddr()+"/payments/"+id, "", "")
				t.Logf("%s: %d changes on the feed %v; the payment: %s", id, len(c.seen[id]), c.seen[id], a.body)
				t.Logf("%s in the stack's logs:\n%s", id, p.grepLogs(id))
			}
		}
	}()
	// A delivery that failed while the machine was busy waits out the simulator's backoff (up to
	// a minute, jittered); what is asserted is the feed, not that schedule, so the wait asks the
	// simulator to send what it still holds now and then.
	lastFlush := time.Now()
	eventually(t, 60*time.Second, "every change on the feed", func() bool {
		for c.poll(t, "http://"+p.apiAddr(), 1) > 0 {
		}
		if len(waiting) > 0 && time.Since(lastFlush) > 2*time.Second {
			call(t, "POST", p.stack().SimURL()+"/_sim/webhooks/flush", "", "")
			lastFlush = time.Now()
		}
		waiting = waiting[:0]
		for _, id := range ids {
			if evs := c.seen[id]; len(evs) == 0 || evs[len(evs)-1].Payment.AmountRefunded == 0 {
				waiting = append(waiting, id)
			}
		}
		return len(waiting) == 0
	})
	c.check(t, "http://"+p.apiAddr(), ids)
	total := 0
	for _, evs := range c.seen {
		total += len(evs)
	}
	t.Logf("%d payments, %d changes, each once and in order across 4 kills", len(ids), total)
}
