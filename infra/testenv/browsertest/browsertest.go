// Package browsertest starts the headless chromium that testenv.Chromium names, for tests
// that drive a page: one browser per test, closed when the test ends.
//
//	ctx := browsertest.New(t, 90*time.Second)
//	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(`#records`))
package browsertest

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/testenv"
)

// New returns a chromedp context on a fresh headless chromium (skipped, or failed under CI,
// when none is configured), sandbox and background traffic off, a 1280x900 window. Everything
// the test does in the browser must finish within limit.
func New(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	})
	return bctx
}
