package recovery

import (
	"math/rand/v2"
	"time"

	"github.com/runtwice/twice/shared/declines"
)

// Schedule simulates a card that declines every attempt with the same classification, starting
// with the original charge at first, and returns every plan in order: the retries, then the
// final stop. Each attempt happens exactly at its planned time. It shows an operator, or a
// README, what the policy does with a decline class.
func Schedule(p Policy, c declines.Classification, first time.Time, rng *rand.Rand) ([]Plan, error) {
	in := Input{Classification: c, Charges: []Charge{{At: first, Result: ResultDeclined, Class: c.Class}}}
	now := first
	var plans []Plan
	for range 1000 { // a valid policy stops well before; the bound keeps a bad one finite
		plan, err := NextAttempt(p, in, now, rng)
		if err != nil {
			return nil, err
		}
		plans = append(plans, plan)
		if !plan.Retry {
			break
		}
		now = plan.At
		in.Charges = append(in.Charges, Charge{At: plan.At, Result: ResultDeclined, Class: c.Class})
	}
	return plans, nil
}
