// Package recoverytest holds the doubles the recovery step tests share: a Provider that
// confirms by Script and, like Stripe, answers a repeated idempotency key with its first
// outcome; a FailingProvider that fails its first confirms; and a DeadLetters sink that keeps
// one record per key. shared/recovery's own tests use them, and so do infra/asl's tests, which
// run the steps under the real state-machine definition on the local runner and so cannot see
// shared/recovery's _test.go files.
//
//	clk := clock.NewFake(t0)
//	prov := recoverytest.NewProvider(clk.Now)
//	prov.SetScript("pm", recoverytest.Script{Code: "insufficient_funds", Declines: 1})
//	dl := &recoverytest.DeadLetters{}
//	steps, err := recovery.NewSteps(recovery.Steps{Provider: prov, Store: st, DeadLetters: dl, ...})
//	...
//	calls, at, effects := prov.Snapshot() // requests per key, charge times, charges per method
package recoverytest
