package inprocess

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// consoleTime is the console's one way of writing a time; rawTime is any other (RFC 3339, or
// the ISO-like form the console used to write).
var (
	consoleTime = regexp.MustCompile(`^\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2} UTC$`)
	rawTime     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}`)
)

// executionOf waits for the recovery execution of the payment created with key to end.
func executionOf(t *testing.T, s *Stack, key string) asl.Execution {
	t.Helper()
	var ex asl.Execution
	eventually(t, 10*time.Second, "the recovery of "+key+" starts", func() bool {
		all, _ := s.runner.ListExecutions(context.Background(), recoveryMachine)
		for _, e := range all {
			if strings.Contains(e.ExecutionArn, "inv_"+key) {
				ex = e
				return true
			}
		}
		return false
	})
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution of %s: %+v %v", key, done, err)
	}
	return done
}

// TestConsoleShowsCurrentStateInBrowser drives the console in headless chromium over a real
// stack and checks that every surface shows what is true now:
//   - a recovered payment's explanation (API and page) says it recovered, not "Retrying on ...";
//   - the payment page shows the card's last four digits, and when the card may next be charged
//     in the console's time format;
//   - every time on the list, a record, a payment and the lookup is "2 Dec 2026 09:06 UTC";
//   - a hard decline's Next is not "retry", its page has no primary Retry, and a retry needs a
//     note; the payment page's dead-letter link opens the record, before and after that retry;
//   - the timeline has one "dead letter opened" row;
//   - "Was it delivered?" marks the replayed answer;
//   - bulk retry asks for confirmation first, and skips the hard decline.
//
// Screenshots of the payment page and the list go to TWICE_SCREENSHOT_DIR when set.
func TestConsoleShowsCurrentStateInBrowser(t *testing.T) {
	bctx := browserOrSkip(t)
	s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["1st before 09:00"]})
	pg := page{t, bctx}
	do, text, eval, textOf, shot := pg.do, pg.text, pg.eval, pg.textOf, pg.shot
	count := func(sel string) string { return eval(fmt.Sprintf(`String(document.querySelectorAll(%q).length)`, sel)) }
	// noRawTimes checks that the page shows every time the console's way.
	noRawTimes := func(where string) {
		t.Helper()
		// Payloads (pre) are shown as stored; everything else is the console's own writing.
		shown := eval(`(() => { const m = document.querySelector("main").cloneNode(true); m.querySelectorAll("pre").forEach(e => e.remove()); return m.textContent })()`)
		if m := rawTime.FindString(shown); m != "" {
			t.Errorf("%s shows a raw time %q", where, m)
		}
		for _, tm := range strings.Split(eval(`[...document.querySelectorAll("main time")].map(e => e.textContent).join("\n")`), "\n") {
			if tm != "" && !consoleTime.MatchString(tm) {
				t.Errorf("%s shows the time %q", where, tm)
			}
		}
	}

	// A soft decline the recovery charges again on the next payday, successfully.
	programCard(t, s.SimURL(), "pm_truth_recovers", "insufficient_funds", 1)
	recovered := createDeclinedFor(t, s, "truth-recovers", "pm_truth_recovers", "cus_grace")
	executionOf(t, s, "truth-recovers")
	got := paymentWithRecovery(t, s, recovered.ID)
	if got.Status != provider.StatusSucceeded || got.Recovery == nil || got.Recovery.State != payments.RecoverySucceeded {
		t.Fatalf("the recovered payment: %+v", got)
	}
	if e := got.Recovery.Explanation; strings.Contains(e, "Retrying") || !strings.Contains(e, "Recovered") {
		t.Errorf("GET /payments/%s explains a recovered payment as %q", recovered.ID, e)
	}
	if got.Card == nil || got.Card.Last4 == "" {
		t.Fatalf("GET /payments/%s has no card last4: %+v", recovered.ID, got.Card)
	}

	// A lost card: a hard decline, whose suggestion says not to retry; asked twice with one key.
	lost := createDeclinedFor(t, s, "truth-lost", "pm_card_visa_chargeDeclinedLostCard", "cus_ada")
	if a := call(t, "POST", s.APIURL()+"/payments", "truth-lost", `{"amount":4200,"currency":"usd","customer":"cus_ada","payment_method":"pm_card_visa_chargeDeclinedLostCard","invoice":"inv_truth-lost"}`); a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the second request was not a replay: %d %v", a.status, a.header)
	}
	executionOf(t, s, "truth-lost")
	hard := recoveryRecordOf(t, s, lost.ID)
	// And a webhook that died: a record a bulk retry may retry.
	webhook := deadMessage(t, s, webhookDLQ, "m-truth", stripeDelivery(t, "evt_truth", true))

	pg.signIn(s)

	// The recovered payment's page.
	do("the recovered payment", chromedp.Navigate(s.APIURL()+"/ops/payments/"+recovered.ID), chromedp.WaitVisible(`#recovery`))
	if e := textOf(`#recovery-explanation`); strings.Contains(e, "Retrying") || !strings.Contains(e, "Recovered") {
		t.Errorf("the page explains a recovered payment as %q", e)
	}
	want := "····" + got.Card.Last4
	if c := textOf(`#payment-card`); !strings.Contains(c, want) {
		t.Errorf("the payment's card reads %q, want %q", c, want)
	}
	if c := textOf(`#recovery-card`); !strings.Contains(c, want) {
		t.Errorf("the recovery's card reads %q, want %q", c, want)
	}
	if n := textOf(`#card-next-allowed`); n != "now" && !consoleTime.MatchString(n) {
		t.Errorf("next allowed reads %q", n)
	}
	noRawTimes("the recovered payment's page")
	shot("payment.png")

	// The list: the hard decline's Next is its suggestion, not retry.
	do("list", chromedp.Navigate(s.APIURL()+"/ops/"), chromedp.WaitVisible(`#records`))
	next := eval(fmt.Sprintf(`document.querySelector('#records a[href="/ops/records/%s"]').closest("tr").querySelector("td.next").innerText`, hard.ID))
	if strings.Contains(next, "retry") || !strings.Contains(next, "ask for another card") {
		t.Errorf("the hard decline's Next reads %q", next)
	}
	noRawTimes("the list")
	shot("list.png")

	// Bulk retry asks first, retries nothing until confirmed, then skips the hard decline.
	do("bulk retry", chromedp.Click(`form[action="/ops/bulk-retry"] button`), chromedp.WaitVisible(`#confirm-page, main .msg`))
	if c := textOf(`#confirm-page`); !strings.Contains(c, "Retry 1 open record?") || !strings.Contains(c, "Skipped: 1 record whose own suggestion says not to retry") {
		t.Errorf("the confirmation reads:\n%s", c)
	}
	if r := getRecord(t, s, webhook.ID); r.Status != deadletter.StatusOpen || r.Retries != 0 {
		t.Errorf("before the confirmation the webhook record is %s with %d retries", r.Status, r.Retries)
	}
	if count(`#confirm`) == "1" {
		do("confirm bulk retry", chromedp.Click(`#confirm`), chromedp.WaitVisible(`main .msg.ok`))
	}
	if r := awaitEnd(t, s, webhook.ID); r.Retries != 1 {
		t.Errorf("after the bulk retry the webhook record has %d retries", r.Retries)
	}
	if r := getRecord(t, s, hard.ID); r.Status != deadletter.StatusOpen || r.Retries != 0 {
		t.Errorf("the bulk retry touched the hard decline: %s, %d retries", r.Status, r.Retries)
	}

	// Was it delivered? The second request with the key is marked as a replay.
	do("lookup", chromedp.Navigate(s.APIURL()+"/ops/lookup?by=idempotency_key&value=truth-lost"), chromedp.WaitVisible(`main table`))
	if n := count(`main table .replay`); n != "1" {
		t.Errorf("the lookup marks %s replays, want 1:\n%s", n, text(`main table`))
	}
	noRawTimes("the lookup")

	// The lost card's page: the dead-letter link opens the record.
	do("the lost card's payment", chromedp.Navigate(s.APIURL()+"/ops/payments/"+lost.ID), chromedp.WaitVisible(`#recovery`))
	link := func() string {
		return eval(`(document.querySelector("#recovery a[href^=\"/ops/records/\"]") || {getAttribute: () => ""}).getAttribute("href")`)
	}
	if n := eval(`String([...document.querySelectorAll("#timeline li")].filter(li => li.innerText.includes("dead letter opened")).length)`); n != "1" {
		t.Errorf("%s timeline rows say the dead letter opened", n)
	}
	if href := link(); href != "/ops/records/"+hard.ID {
		t.Errorf("the dead-letter link is %q, want the record %s", href, hard.ID)
		do("the record", chromedp.Navigate(s.APIURL()+"/ops/records/"+hard.ID), chromedp.WaitVisible(`#status`))
	}
	if count(`#status`) == "0" {
		do("the dead-letter link", chromedp.Click(`#recovery a[href^="/ops/records/"]`), chromedp.WaitVisible(`#status`))
	}
	noRawTimes("the record's page")
	if n := count(`#retry`); n != "0" {
		t.Errorf("a hard decline offers the primary Retry (%s)", n)
	}
	if n := count(`#retry-anyway`); n != "1" {
		t.Fatalf("a hard decline offers no Retry anyway (%s)", n)
	}
	// The JSON API refuses it too.
	if a := ops(t, s, "POST", "/ops/deadletters/"+hard.ID+"/retry", `{}`); a.status != http.StatusBadRequest || !strings.Contains(a.body, "a retry needs a note") {
		t.Errorf("the API retried a hard decline without a note, or said why wrongly: %d %s", a.status, a.body)
	}
	// Retry anyway without a note: the form requires one, and so does the server.
	eval(`document.querySelector("#retry-anyway").form.querySelector("textarea").removeAttribute("required"); ""`)
	do("retry without a note", chromedp.Click(`#retry-anyway`), chromedp.WaitVisible(`main .msg.err`))
	if e := textOf(`main .msg.err`); !strings.Contains(e, "say why") {
		t.Errorf("a retry without a note says %q", e)
	}
	if r := getRecord(t, s, hard.ID); r.Retries != 0 {
		t.Fatalf("a retry without a note was sent (%d retries)", r.Retries)
	}
	do("retry with a note", chromedp.SendKeys(`form[action$="/retry"] textarea[name="note"]`, "the customer found the card"),
		chromedp.Click(`#retry-anyway`), chromedp.WaitVisible(`main .msg.ok`))
	if r := awaitEnd(t, s, hard.ID); r.Status != deadletter.StatusOpen || r.Retries != 1 {
		t.Fatalf("after the retry the record is %s with %d retries", r.Status, r.Retries)
	}
	// The retry's round stopped again: the link still opens the same record, not round 2's key.
	do("the lost card's payment again", chromedp.Navigate(s.APIURL()+"/ops/payments/"+lost.ID), chromedp.WaitVisible(`#recovery`))
	afterRetry := link()
	if afterRetry != "/ops/records/"+hard.ID {
		t.Errorf("after the retry the dead-letter link is %q, want the record %s", afterRetry, hard.ID)
	}
	if n := eval(`String([...document.querySelectorAll("#timeline li")].filter(li => li.innerText.includes("dead letter opened")).length)`); n != "1" {
		t.Errorf("after the retry %s timeline rows say the dead letter opened", n)
	}
	// The networks' caps would allow another attempt, but the issuer refuses this card.
	if n := textOf(`#card-next-allowed`); !strings.HasPrefix(n, "never") {
		t.Errorf("a lost card may next be charged %q", n)
	}
	noRawTimes("the lost card's page")
	shot("payment-hard-decline.png")
	if afterRetry == "/ops/records/"+hard.ID {
		do("the dead-letter link again", chromedp.Click(`#recovery a[href^="/ops/records/"]`), chromedp.WaitVisible(`#status`))
	}
}

// recoveryRecordOf is the open recovery dead-letter record of a payment.
func recoveryRecordOf(t *testing.T, s *Stack, paymentID string) apiRecord {
	t.Helper()
	var id string
	eventually(t, 10*time.Second, "a dead-letter record opens for "+paymentID, func() bool {
		for _, r := range opsList(t, s, "source=recovery") {
			if r["payment_id"] == paymentID {
				id, _ = r["id"].(string)
				return true
			}
		}
		return false
	})
	return getRecord(t, s, id)
}
