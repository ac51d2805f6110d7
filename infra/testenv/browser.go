package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser is a headless chromium for one test, driven by chromedp.
type Browser struct {
	t   testing.TB
	Ctx context.Context // the browser tab; pass it to chromedp.Run for anything else
}

// NewBrowser starts chromium (Chromium's path) with a fresh profile, no sandbox, no
// background networking, for at most timeout; the test's cleanup stops it.
func NewBrowser(t testing.TB, timeout time.Duration) *Browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 1400),
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancel() })
	return &Browser{t: t, Ctx: bctx}
}

// Step runs the actions, failing the test with what was being done.
func (b *Browser) Step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, actions...); err != nil {
		b.t.Fatalf("browser, %s: %v", what, err)
	}
}

// Text returns the text of the first element sel matches.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("browser, reading %s: %v", sel, err)
	}
	return s
}
