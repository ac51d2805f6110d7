package clock

import "time"

// Clock is a source of time that can be replaced: the wall clock in production, an
// Accelerated clock for a local stack, a Fake in tests.
type Clock interface {
	Now() time.Time
	// NewTimer fires once d has passed on this clock; d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer. Callers Stop every timer they no longer need: a Fake
// then stops counting it as a waiter.
type Timer interface {
	C() <-chan time.Time
	// Stop reports whether it stopped the timer (false: it had fired or was stopped).
	Stop() bool
}

var (
	_ Clock = realClock{}
	_ Timer = wallTimer{}
)

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
