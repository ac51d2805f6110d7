//go:build race

package recovery

// raceEnabled makes the calendar sweep take every fifth hour under the race detector, which
// slows its millions of plans tenfold; make test also runs the sweep over every hour without it.
const raceEnabled = true
