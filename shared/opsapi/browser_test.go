package opsapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/testenv"
)

// TestBrowserRetry drives the console in headless chromium: sign in, find the seeded record,
// open it, click Retry, and see the new status and the audit entry. CI sets CI=true, so a
// missing browser fails there instead of skipping.
func TestBrowserRetry(t *testing.T) {
	f := newFixture(t)
	br := testenv.NewBrowser(t, 60*time.Second)
	step, text := br.Step, br.Text
	step("sign in",
		chromedp.Navigate(f.srv.URL+"/ops/"),
		chromedp.WaitVisible(`input[name="token"]`),
		chromedp.SendKeys(`input[name="token"]`, token),
		chromedp.SendKeys(`input[name="name"]`, "Ada"),
		chromedp.Submit(`input[name="token"]`),
		chromedp.WaitVisible(`#records`))
	list := text(`#records`)
	step("open the record", chromedp.Click(`#records a`), chromedp.WaitVisible(`#retry`))
	step("retry", chromedp.Click(`#retry`), chromedp.WaitVisible(`div.msg.ok`))
	notice, status, audit := text(`div.msg.ok`), text(`#status`), text(`#audit`)
	shot, err := chromedp.Run(br.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !strings.Contains(list, f.record.ID) {
		t.Errorf("the list does not show the seeded record %s:\n%s", f.record.ID, list)
	}
	if strings.TrimSpace(status) != "retrying" || !strings.Contains(notice, "Retry queued") {
		t.Errorf("after Retry: status %q, notice %q", status, notice)
	}
	if !strings.Contains(audit, "operator:Ada") || !strings.Contains(audit, "retry") {
		t.Errorf("audit trail lacks the retry by Ada:\n%s", audit)
	}
	f.deliver(t)
	if f.sent.n != 1 {
		t.Errorf("%d retries sent, want 1", f.sent.n)
	}
	dir := os.Getenv("TWICE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "console-retry.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}
