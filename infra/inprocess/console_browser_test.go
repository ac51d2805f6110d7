package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/testenv/browsertest"
	"github.com/runtwice/twice/shared/payments"
)

// browserOrSkip starts chromium before the stack, so a test without one skips at once.
func browserOrSkip(t *testing.T) context.Context { return browsertest.New(t, 90*time.Second) }

// page drives one test's browser: a step that fails fails the test, naming what it was doing.
type page struct {
	t   *testing.T
	ctx context.Context
}

// screenshotDir is where a test's screenshots go: TWICE_SCREENSHOT_DIR when set.
func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("TWICE_SCREENSHOT_DIR"); dir != "" {
		return dir
	}
	return t.TempDir()
}

func (p page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("browser, %s: %v", what, err)
	}
}

func (p page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(sel))
	if err != nil {
		p.t.Fatalf("browser, reading %s: %v", sel, err)
	}
	return s
}

// eval runs js in the page and returns its string result.
func (p page) eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.t.Fatalf("browser, %s: %v", js, err)
	}
	return v
}

// textOf reads an element that may be missing ("" then), so each check fails on its own.
func (p page) textOf(sel string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// shot saves a screenshot of the whole page as name.
func (p page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// signIn signs in to the stack's console with its operator token, as Ada.
func (p page) signIn(s *Stack) {
	p.t.Helper()
	p.do("sign in", chromedp.Navigate(s.APIURL()+"/ops/"), chromedp.WaitVisible(`input[name="token"]`),
		chromedp.SendKeys(`input[name="token"]`, s.Config().OperatorToken), chromedp.SendKeys(`input[name="name"]`, "Ada"),
		chromedp.Submit(`input[name="token"]`), chromedp.WaitVisible(`#records`))
}

// TestConsoleTimelineAndListInBrowser drives the console of a real stack in headless chromium
// at a desktop and a phone width: a lost card (a hard decline: the recovery files a dead
// letter at once) must show its amount, customer, card and next action in the list, and its
// timeline must show the API call, the provider call and the dead letter, with human
// durations and a request that opens without JavaScript (the console's CSP allows none).
// Screenshots go to TWICE_SCREENSHOT_DIR when set.
func TestConsoleTimelineAndListInBrowser(t *testing.T) {
	bctx := browserOrSkip(t)
	s := newStack(t, Config{})
	a := call(t, "POST", s.APIURL()+"/payments", "order-lost", `{"amount":4250,"currency":"eur","customer":"cus_ada","payment_method":"pm_card_visa_chargeDeclinedLostCard"}`)
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusPaymentRequired {
		t.Fatalf("lost card: %d %s", a.status, a.body)
	}
	eventually(t, 20*time.Second, "the hard decline is a dead letter", func() bool {
		return strings.Contains(ops(t, s, "GET", "/ops/deadletters?status=open", "").body, v.ID)
	})

	pg := page{t, bctx}
	do, text, shot := pg.do, pg.text, pg.shot
	// overflow is how far the page is wider than the viewport: a phone must not scroll sideways.
	overflow := func() int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pg.signIn(s)

	for _, width := range []int64{1280, 390} {
		name := map[int64]string{1280: "desktop", 390: "phone"}[width]
		do("viewport", chromedp.EmulateViewport(width, 900))
		do("list", chromedp.Navigate(s.APIURL()+"/ops/"), chromedp.WaitVisible(`#records td.amount`), chromedp.WaitVisible(`#records td.customer`))
		list := text(`#records`)
		// A lost card's suggestion says not to retry: Next says what it says instead.
		for _, want := range []string{"42.50 EUR", "cus_ada", "visa", "9987", "ask for another card", v.ID, "ago"} {
			if !strings.Contains(list, want) {
				t.Errorf("%s list lacks %q:\n%s", name, want, list)
			}
		}
		if n := overflow(); n > 0 {
			t.Errorf("%s list is %d px wider than the screen", name, n)
		}
		shot("deadletters-" + name + ".png")

		do("timeline", chromedp.Navigate(s.APIURL()+"/ops/payments/"+v.ID), chromedp.WaitVisible(`#timeline`))
		head, tl := text(`#payment`), text(`#timeline`)
		for _, want := range []string{"42.50 EUR", "cus_ada", "declined"} {
			if !strings.Contains(head, want) {
				t.Errorf("%s timeline head lacks %q:\n%s", name, want, head)
			}
		}
		for _, want := range []string{"API payments.create", "stripe payment_intents.create", "dead letter opened", "402", " ms"} {
			if !strings.Contains(tl, want) {
				t.Errorf("%s timeline lacks %q:\n%s", name, want, tl)
			}
		}
		if strings.Contains(tl, "µs\n") && strings.Contains(tl, ".") && strings.Contains(tl, "ms ") {
			t.Errorf("a Go duration in the timeline:\n%s", tl)
		}
		// Open the provider call's row: a <details>, no script involved.
		do("open a row", chromedp.Click(`#timeline li.provider summary`), chromedp.WaitVisible(`#timeline li.provider pre`))
		if req := text(`#timeline li.provider pre`); !strings.Contains(req, "amount=4250") {
			t.Errorf("%s: the opened row shows %q, want the redacted request", name, req)
		}
		if n := overflow(); n > 0 {
			t.Errorf("%s timeline is %d px wider than the screen", name, n)
		}
		shot("timeline-" + name + ".png")
	}
}
