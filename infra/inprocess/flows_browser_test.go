package inprocess

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/shared/provider"
)

// TestConsoleShowsPaymentFlowsInBrowser drives the payment page in headless chromium over a
// real stack for the flows merchants run:
//   - a refunded payment lists its refunds (amount, status, the failure reason of one the card
//     refused) and the amount refunded, and its timeline has one row for the refund request and
//     one for its outcome;
//   - an authorization shows what is held and when the hold lapses, in the console's one time
//     format with its zone;
//   - a payment awaiting 3-D Secure says the customer must act, and the page holds no byte of
//     its client secret.
//
// Screenshots of the three pages go to TWICE_SCREENSHOT_DIR when set.
func TestConsoleShowsPaymentFlowsInBrowser(t *testing.T) {
	bctx := browserOrSkip(t)
	s := newStack(t, Config{RefundFailureDelay: time.Nanosecond})
	pg := page{t, bctx}
	eval, textOf, shot := pg.eval, pg.textOf, pg.shot

	// A payment refunded in part, a refund the card then refuses.
	id, _ := paidPayment(t, s, "flows-refunded", "pm_card_refundFail", 2000)
	if a := refund(t, s, id, "flows-refund-1", `{"amount":500,"reason":"requested_by_customer"}`); a.status != http.StatusCreated {
		t.Fatalf("refund: %d %s", a.status, a.body)
	}
	if _, err := s.sim.RunDue(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the first refund failed", func() bool {
		v := getPayment(t, s, id)
		return len(v.Refunds) == 1 && v.Refunds[0].Status == "failed"
	})
	// An authorization, held.
	a := call(t, "POST", s.APIURL()+"/payments", "flows-hold", `{"amount":3000,"currency":"usd","customer":"cus_hold","payment_method":"pm_card_visa","capture_method":"manual"}`)
	held := view(t, a)
	if a.status != http.StatusCreated || held.Status != provider.StatusRequiresCapture || held.CaptureBefore == nil {
		t.Fatalf("hold: %d %s", a.status, a.body)
	}
	captureBefore, err := time.Parse(time.RFC3339, *held.CaptureBefore)
	if err != nil {
		t.Fatal(err)
	}
	// A payment waiting for 3-D Secure, with its client secret.
	waiting := create3DS(t, s, "flows-3ds")
	secret := *waiting.ClientSecret

	pg.signIn(s)

	pg.do("the refunded payment", chromedp.Navigate(s.APIURL()+"/ops/payments/"+id), chromedp.WaitVisible(`#refunds`))
	v := getPayment(t, s, id)
	if got, want := textOf(`#payment-refunded`), fmt.Sprintf("%d.%02d USD", v.AmountRefunded/100, v.AmountRefunded%100); got != want {
		t.Errorf("refunded reads %q, want %q", got, want)
	}
	rows := eval(`[...document.querySelectorAll("#refunds tr.refund")].map(r => r.innerText.replace(/\s+/g, " ").trim()).join("\n")`)
	if n := len(strings.Split(rows, "\n")); rows == "" || n != len(v.Refunds) {
		t.Fatalf("refund rows:\n%s\nwant %d", rows, len(v.Refunds))
	}
	first := strings.Split(rows, "\n")[0]
	for _, want := range []string{"5.00 USD", "failed", "expired_or_canceled_card", "requested_by_customer"} {
		if !strings.Contains(first, want) {
			t.Errorf("the failed refund's row %q lacks %q", first, want)
		}
	}
	for _, tm := range strings.Split(eval(`[...document.querySelectorAll("#refunds time")].map(e => e.textContent).join("\n")`), "\n") {
		if !consoleTime.MatchString(tm) {
			t.Errorf("a refund's time reads %q", tm)
		}
	}
	tl := eval(`[...document.querySelectorAll("#timeline li")].map(li => li.querySelector(".t").innerText).join("\n")`)
	if strings.Count(tl, "refund requested") != 1 || strings.Count(tl, "refund failed: expired_or_canceled_card") != 1 {
		t.Errorf("the timeline rows:\n%s", tl)
	}
	shot("payment-refunds.png")

	pg.do("the authorization", chromedp.Navigate(s.APIURL()+"/ops/payments/"+held.ID), chromedp.WaitVisible(`#payment-hold`))
	if got := textOf(`#payment-hold`); got != "30.00 USD" {
		t.Errorf("the hold reads %q", got)
	}
	cb := textOf(`#payment-capture-before`)
	if !consoleTime.MatchString(cb) || cb != captureBefore.UTC().Format("2 Jan 2006 15:04 MST") {
		t.Errorf("capture before reads %q, want %s in the console's format", cb, captureBefore.UTC())
	}
	if act := textOf(`#payment-capture-action`); !strings.Contains(act, cb) || !strings.Contains(act, "capture") {
		t.Errorf("the capture advice reads %q", act)
	}
	shot("payment-hold.png")

	pg.do("the payment awaiting 3-D Secure", chromedp.Navigate(s.APIURL()+"/ops/payments/"+waiting.ID),
		chromedp.WaitVisible(`#payment-customer-action`))
	if act := textOf(`#payment-customer-action`); !strings.Contains(act, "customer must authenticate") || !strings.Contains(act, waiting.NextAction.Type) {
		t.Errorf("the customer's action reads %q", act)
	}
	if n := eval(`String([...document.querySelectorAll("#timeline li")].filter(li => li.innerText.includes("waiting for the customer to authenticate")).length)`); n != "1" {
		t.Errorf("%s timeline rows show the authentication wait", n)
	}
	// Not the secret, nor its tail after the payment id (the part that is the credential).
	html := eval(`document.documentElement.outerHTML`)
	tail := strings.TrimPrefix(secret, deref(waiting.ProviderPaymentID))
	if strings.Contains(html, secret) || strings.Contains(html, tail) {
		t.Fatalf("the page shows the client secret")
	}
	shot("payment-3ds.png")
}
