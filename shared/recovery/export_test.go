package recovery

import "testing"

// SetSteerPage makes SteerMessages read pages of n until the test ends, so a test pages with a
// few recoveries.
func SetSteerPage(t testing.TB, n int) {
	old := steerPage
	steerPage = n
	t.Cleanup(func() { steerPage = old })
}

const MaxSteered = maxSteered
