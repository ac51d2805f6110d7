// Package clock is the injectable time source of the packages that wait: the Step Functions
// runner (infra/asl), the local queue (infra/localqueue), the local stack (infra/inprocess) and
// the reconciliation schedule (shared/recon).
//
// A Clock reads the time and makes one-shot Timers. Three implementations:
//
//   - Real: the wall clock.
//   - Accelerated: wall time running Factor times faster from an anchor. The local stack runs
//     payment recovery on one so that a plan days long plays out in minutes, and persists its
//     fields so a restarted process continues the same timeline.
//   - Fake: moves only when a test calls Advance or AdvanceToNext; BlockUntil waits until the
//     code under test is waiting, so tests never sleep.
//
// Code that only needs the time takes a func() time.Time (clock.Now) rather than a Clock.
package clock
