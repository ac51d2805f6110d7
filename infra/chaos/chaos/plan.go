package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Card is a test PaymentMethod of the simulator and the local status it ends in.
type Card struct {
	PaymentMethod string
	Weight        int // relative frequency in a plan
}

// Cards is the mix a plan draws from: mostly a card that succeeds, some declines (a soft one, a
// hard one, a processing error).
var Cards = []Card{
	{"pm_card_visa", 82},
	{"pm_card_visa_chargeDeclinedInsufficientFunds", 6},
	{"pm_card_visa_chargeDeclinedLostCard", 6},
	{"pm_card_chargeDeclinedProcessingError", 6},
}

// Payment is one logical payment of a plan: one Idempotency-Key and one body, sent First
// times at once and then Later times after Delay.
type Payment struct {
	Index  int
	Key    string
	Body   string
	Card   string
	First  int           // concurrent sends of the first wave (2..3)
	Later  int           // sends of the second wave (1..2)
	Delay  time.Duration // between the waves
	Client uint64        // seed of this payment's client (its retry jitter)
}

// Plan is everything a seed decides: the payments, where the kills fall and the chaos
// schedule. Timing between goroutines is not decided by the seed, so two runs of one seed send
// the same requests and arm the same faults in the same order, but not at the same instants.
type Plan struct {
	Seed     uint64
	Payments []Payment
	// KillAt holds, in ascending order, the number of payments started at which the stack is
	// killed.
	KillAt []int
}

// NewPlan draws the plan of a seed.
func NewPlan(seed uint64, payments, kills int, maxDelay time.Duration) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	p := Plan{Seed: seed, Payments: make([]Payment, payments)}
	total := 0
	for _, c := range Cards {
		total += c.Weight
	}
	for i := range p.Payments {
		card := Cards[0].PaymentMethod
		for n, c := rng.IntN(total), 0; ; c++ {
			if n < Cards[c].Weight {
				card = Cards[c].PaymentMethod
				break
			}
			n -= Cards[c].Weight
		}
		amount := 500 + rng.IntN(99_500)
		p.Payments[i] = Payment{
			Index: i,
			Key:   fmt.Sprintf("chaos-%d-%06d", seed, i),
			Body: fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_chaos_%03d","payment_method":%q,"description":"chaos %d/%d"}`,
				amount, rng.IntN(200), card, seed, i),
			Card:   card,
			First:  2 + rng.IntN(2),
			Later:  1 + rng.IntN(2),
			Delay:  time.Duration(rng.Int64N(int64(maxDelay) + 1)),
			Client: rng.Uint64(),
		}
	}
	// Kills fall between 10 % and 90 % of the payments started, so each one lands among
	// requests in flight and some payments start after the last restart.
	for range kills {
		p.KillAt = append(p.KillAt, payments/10+rng.IntN(max(1, payments*8/10)))
	}
	slices.Sort(p.KillAt)
	return p
}
