package inprocess

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// TestConsoleSteersRecoveriesInBrowser: in headless chromium, the operator finds two parked
// recoveries on the console's Recoveries page, opens each payment from its link, and presses
// "Charge now" on one (it is charged within a minute of recovery time, once) and "Stop recovery"
// on the other (it ends without a charge).
func TestConsoleSteersRecoveriesInBrowser(t *testing.T) {
	bctx := browserOrSkip(t)
	s := newStack(t, Config{TimeFactor: steerFactor})
	now, exNow := parkedRecovery(t, s, "console-now", "pm_console_now")
	stop, exStop := parkedRecovery(t, s, "console-stop", "pm_console_stop")

	dir := screenshotDir(t)
	pg := page{t, bctx}
	do, text := pg.do, pg.text
	pg.signIn(s)
	do("recoveries", chromedp.Navigate(s.APIURL()+"/ops/running"), chromedp.WaitVisible(`#recoveries`))
	list := text(`#recoveries`)
	for _, want := range []string{now.ID, stop.ID, "visa", "payday"} {
		if !strings.Contains(list, want) {
			t.Fatalf("the recoveries list lacks %q:\n%s", want, list)
		}
	}
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "recoveries.png"), png, 0o644)
	}

	do("open the first payment", chromedp.Click(`a[href="/ops/payments/`+now.ID+`"]`), chromedp.WaitVisible(`#recovery`))
	if st := text(`#recovery-state`); st != payments.RecoveryScheduled {
		t.Fatalf("recovery state %q", st)
	}
	// Charge now asks first, on a page of its own, and sends nothing until confirmed.
	do("charge now", chromedp.SendKeys(`form[action$="/recovery/charge-now"] input[name="note"]`, "customer called"),
		chromedp.Click(`#charge-now`), chromedp.WaitVisible(`#confirm-page, main .msg`))
	if c := text(`main`); !strings.Contains(c, "Charge 42.00 USD now?") || !strings.Contains(c, now.ID) {
		t.Fatalf("charge-now does not ask first; the page says:\n%s", c)
	}
	if got := paymentWithRecovery(t, s, now.ID); got.Recovery == nil || got.Recovery.State != payments.RecoveryScheduled {
		t.Fatalf("before the confirmation the recovery is %+v", got.Recovery)
	}
	do("confirm charge now", chromedp.Click(`#confirm`), chromedp.WaitVisible(`main .msg`))
	if b := text(`main`); !strings.Contains(b, "Queued for the recovery") {
		t.Fatalf("after charge-now the page says:\n%s", b)
	}
	done, err := awaitRecovery(t, s, exNow)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	if got := paymentWithRecovery(t, s, now.ID); got.Status != provider.StatusSucceeded {
		t.Fatalf("payment %s after charge-now", got.Status)
	}
	if steered, charged := stateEntered(t, s, exNow, "Steer"), stateEntered(t, s, exNow, "Charge"); charged.Sub(steered) > time.Minute || charged.Before(steered) {
		t.Fatalf("steered %s, charged %s", steered, charged)
	}
	if evs := simEvents(t, s, deref(now.ProviderPaymentID)); strings.Join(evs, " ") != "payment_failed succeeded" {
		t.Fatalf("charges %v", evs)
	}

	do("open the second payment", chromedp.Navigate(s.APIURL()+"/ops/running"), chromedp.WaitVisible(`#recoveries`),
		chromedp.Click(`a[href="/ops/payments/`+stop.ID+`"]`), chromedp.WaitVisible(`#recovery`))
	do("stop", chromedp.Click(`#stop-recovery`), chromedp.WaitVisible(`main .msg`))
	if b := text(`main`); !strings.Contains(b, "Queued for the recovery") {
		t.Fatalf("after stop the page says:\n%s", b)
	}
	done, err = awaitRecovery(t, s, exStop)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	do("reload", chromedp.Navigate(s.APIURL()+"/ops/payments/"+stop.ID), chromedp.WaitVisible(`#recovery`))
	if st := text(`#recovery-state`); st != payments.RecoveryStopped {
		t.Fatalf("after stop the page says %q", st)
	}
	if strings.Contains(text(`#recovery`), "Charge now") {
		t.Fatal("a stopped recovery still offers charge-now")
	}
	if evs := simEvents(t, s, deref(stop.ProviderPaymentID)); strings.Join(evs, " ") != "payment_failed" {
		t.Fatalf("a stopped recovery charged: %v", evs)
	}
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "recovery-stopped.png"), png, 0o644)
	}
}
