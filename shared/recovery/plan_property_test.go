package recovery

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/declines"
)

// Codes drawn for the property tests: every timing rule, hard codes, and unknown ones.
var (
	propCodes    = []string{"", "insufficient_funds", "card_velocity_exceeded", "invalid_amount", "processing_error", "generic_decline", "do_not_honor", "lost_card", "fraudulent", "expired_card", "authentication_required", "revocation_of_authorization", "brand_new_code"}
	propAdvice   = []string{"", "", "", "do_not_try_again", "confirm_card_data", "try_again_later"}
	propMACs     = []string{"", "", "01", "02", "03", "04", "21", "24", "25", "26", "27", "28", "29", "30", "77"}
	propNetCodes = []string{"", "", "05", "51", "61", "91", "41", "R1", "54", "Q9"}
	propNetworks = []declines.Network{declines.NetworkVisa, declines.NetworkMastercard, declines.NetworkAmex, declines.NetworkUnknown}
	propClasses  = []declines.Class{declines.ClassTechnical, declines.ClassGeneric, declines.ClassLimit, "", declines.ClassHard}
	propOutcomes = []Result{ResultDeclined, ResultDeclined, ResultFailed, ResultSucceeded}
)

type scenario struct {
	policy Policy
	in     Input
	now    time.Time
	seed   uint64
}

func drawScenario(t *rapid.T) scenario {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, int64(400*day)).Draw(t, "now")))
	p := DefaultPolicy()
	p.MaxAttempts = rapid.IntRange(1, 40).Draw(t, "maxAttempts")
	p.Window = time.Duration(rapid.IntRange(1, 60).Draw(t, "windowDays")) * day
	p.AnchorSpread = time.Duration(rapid.Int64Range(0, int64(day)).Draw(t, "anchorSpread"))
	p.Hour = rapid.IntRange(0, 23).Draw(t, "hour")
	p.Paydays = rapid.SliceOfN(rapid.IntRange(1, 31), 1, 3).Draw(t, "paydays")
	p.UseBillingAnchor = rapid.Bool().Draw(t, "useAnchor")
	p.TechnicalBase = time.Duration(rapid.Int64Range(int64(time.Second), int64(time.Hour)).Draw(t, "base"))
	p.TechnicalCap = p.TechnicalBase + time.Duration(rapid.Int64Range(0, int64(day)).Draw(t, "capExtra"))
	if rapid.Bool().Draw(t, "zone") {
		p.Location = time.FixedZone("X", rapid.IntRange(-12, 14).Draw(t, "offsetHours")*3600)
	}

	network := rapid.SampledFrom(propNetworks).Draw(t, "network")
	c := declines.Classify(declines.Decline{
		Code:               rapid.SampledFrom(propCodes).Draw(t, "code"),
		AdviceCode:         rapid.SampledFrom(propAdvice).Draw(t, "advice"),
		NetworkAdviceCode:  rapid.SampledFrom(propMACs).Draw(t, "mac"),
		NetworkDeclineCode: rapid.SampledFrom(propNetCodes).Draw(t, "netcode"),
		Network:            network,
	})

	// This payment: the first attempt up to 60 days ago, the rest after it, the last one the
	// decline being planned for.
	span := time.Duration(rapid.Int64Range(0, int64(60*day)).Draw(t, "span"))
	n := rapid.IntRange(1, 45).Draw(t, "attempts")
	offs := make([]time.Duration, n)
	for i := range offs {
		offs[i] = time.Duration(rapid.Int64Range(0, int64(span)).Draw(t, "offset"))
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	first := now.Add(-span)
	as := make([]Charge, n)
	for i, o := range offs {
		as[i] = Charge{At: first.Add(o), Result: rapid.SampledFrom(propOutcomes).Draw(t, "outcome"), Class: rapid.SampledFrom(propClasses).Draw(t, "class")}
	}
	as[n-1].Result, as[n-1].Class = ResultDeclined, c.Class
	if rapid.IntRange(0, 4).Draw(t, "retryAfter?") == 0 {
		as[n-1].RetryAfterSeconds = rapid.Int64Range(1, 3*86400).Draw(t, "retryAfter")
	}
	card := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Charge {
		return Charge{
			At:        now.Add(-time.Duration(rapid.Int64Range(0, int64(40*day)).Draw(t, "cardAgo"))),
			Result:    rapid.SampledFrom(propOutcomes).Draw(t, "cardOutcome"),
			Reattempt: rapid.Bool().Draw(t, "cardReattempt"),
		}
	}), 0, 60).Draw(t, "card")
	return scenario{
		policy: p,
		in:     Input{Classification: c, Charges: as, CardCharges: card, AnchorDay: rapid.IntRange(0, 31).Draw(t, "anchor")},
		now:    now,
		seed:   rapid.Uint64().Draw(t, "seed"),
	}
}

// countIn counts the attempts that match in the window (t-per, t], written plainly rather
// than shared with the code under test.
func countIn(in Input, t time.Time, per time.Duration, match func(a Charge, i int) bool) int {
	n := 0
	for i, a := range in.Charges {
		if a.At.After(t.Add(-per)) && match(a, i) {
			n++
		}
	}
	for _, a := range in.CardCharges {
		if a.At.After(t.Add(-per)) && match(a, -1) {
			n++
		}
	}
	return n
}

func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawScenario(t)
		plan, err := NextAttempt(s.policy, s.in, s.now, rand.New(rand.NewPCG(s.seed, 1)))
		if err != nil {
			t.Fatalf("NextAttempt: %v", err)
		}
		c, last := s.in.Classification, s.in.Charges[len(s.in.Charges)-1]
		if plan.Explanation == "" || plan.Class != c.Class {
			t.Fatalf("plan %+v", plan)
		}
		if !plan.Retry {
			if !plan.At.IsZero() || plan.Attempt != len(s.in.Charges) {
				t.Fatalf("stop with a time or wrong attempt: %+v", plan)
			}
			return
		}
		// Never a hard, needs-someone decline; never past our own maximum.
		if !c.Retryable || c.Class == declines.ClassHard || c.NeedsCustomer || c.NeedsReview {
			t.Fatalf("retry of a non-retryable decline %+v", c)
		}
		if len(s.in.Charges)-1 >= s.policy.MaxAttempts || plan.Attempt != len(s.in.Charges)+1 {
			t.Fatalf("attempt %d with %d made, max %d retries", plan.Attempt, len(s.in.Charges), s.policy.MaxAttempts)
		}
		// Never in the past, never after the window, always a Wait-ready timestamp.
		if plan.At.Before(s.now) || plan.At.After(s.in.Charges[0].At.Add(s.policy.Window)) {
			t.Fatalf("at %s outside [now %s, window end]", plan.At, s.now)
		}
		if plan.At.Location() != time.UTC || plan.At.Nanosecond() != 0 {
			t.Fatalf("at %v not UTC whole seconds", plan.At)
		}
		// Never breaks a network cap, counting the planned attempt.
		switch c.Network {
		case declines.NetworkVisa:
			if n := countIn(s.in, plan.At, 30*day, func(a Charge, i int) bool { return i > 0 || (i < 0 && a.Reattempt) }); n+1 > 20 {
				t.Fatalf("Visa: %d reattempts in 30 days with the planned one", n+1)
			}
		case declines.NetworkMastercard:
			dec := func(a Charge, _ int) bool { return a.Result == ResultDeclined }
			if n := countIn(s.in, plan.At, 24*time.Hour, dec); n+1 > 10 {
				t.Fatalf("Mastercard: %d declines in 24 h if the planned one declines", n+1)
			}
			if n := countIn(s.in, plan.At, 30*day, dec); n+1 > 35 {
				t.Fatalf("Mastercard: %d declines in 30 days if the planned one declines", n+1)
			}
		}
		if plan.Limit != "" {
			return // moved by a cap: the rule's own bounds no longer apply
		}
		// The rule's own timing: exact delays exact, jitter within its bounds.
		floor := func(t time.Time) time.Time {
			if t.Before(s.now) {
				return ceilSecond(s.now)
			}
			return ceilSecond(t)
		}
		within := func(lo, hi time.Time) {
			if plan.At.Before(floor(lo)) || plan.At.After(floor(hi)) {
				t.Fatalf("%s: at %s outside [%s, %s]", plan.Reason, plan.At, floor(lo), floor(hi))
			}
		}
		switch {
		case last.RetryAfterSeconds > 0:
			if want := floor(last.At.Add(time.Duration(last.RetryAfterSeconds) * time.Second)); !plan.At.Equal(want) || plan.Reason != ReasonRetryAfter {
				t.Fatalf("Retry-After: at %s, want %s", plan.At, want)
			}
		case c.Action == declines.ActionRetryAfter:
			if want := floor(last.At.Add(time.Duration(c.DelaySeconds) * time.Second)); !plan.At.Equal(want) || plan.Reason != ReasonAdvisedDelay {
				t.Fatalf("advised delay: at %s, want %s", plan.At, want)
			}
		case c.Action == declines.ActionRetryBackoff:
			// Full jitter: within [0, min(cap, base*2^n)), n the technical declines in a row
			// before this one, computed in floating point so that it cannot overflow.
			n := 0
			for i := len(s.in.Charges) - 2; i >= 0 && s.in.Charges[i].Class == c.Class; i-- {
				n++
			}
			ceiling := time.Duration(math.Min(float64(s.policy.TechnicalCap), math.Ldexp(float64(s.policy.TechnicalBase), n)))
			within(last.At, last.At.Add(ceiling))
		case c.Action == declines.ActionRetrySpaced:
			within(last.At.Add(day), last.At.Add(2*day+s.policy.GenericSpread))
		case c.Action == declines.ActionRetryNextDay:
			within(last.At, last.At.Add(2*day+s.policy.AnchorSpread))
			if !laterDay(plan.At, last.At, s.policy.Location) {
				t.Fatalf("next-day retry on the same local day: %s after %s", plan.At, last.At)
			}
		case c.Action == declines.ActionRetryWhenFunded || c.Action == declines.ActionRetryNextCycle:
			within(last.At, last.At.Add(32*day+s.policy.AnchorSpread))
			if !laterDay(plan.At, last.At, s.policy.Location) {
				t.Fatalf("funded retry on the same local day: %s after %s", plan.At, last.At)
			}
		}
	})
}

// laterDay reports whether a falls on a later calendar day than b in loc.
func laterDay(a, b time.Time, loc *time.Location) bool {
	ay, am, ad := a.In(loc).Date()
	by, bm, bd := b.In(loc).Date()
	return time.Date(ay, am, ad, 0, 0, 0, 0, time.UTC).After(time.Date(by, bm, bd, 0, 0, 0, 0, time.UTC))
}

// TestScheduleProperties runs whole schedules: a card declined every time never gets more
// retries than the policy allows and every retry is later than the one before.
func TestScheduleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawScenario(t)
		plans, err := Schedule(s.policy, s.in.Classification, s.now, rand.New(rand.NewPCG(s.seed, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if len(plans) == 0 || plans[len(plans)-1].Retry {
			t.Fatalf("schedule does not end in a stop: %d plans", len(plans))
		}
		if len(plans)-1 > s.policy.MaxAttempts {
			t.Fatalf("%d retries, max %d", len(plans)-1, s.policy.MaxAttempts)
		}
		prev := s.now
		for _, p := range plans[:len(plans)-1] {
			if p.At.Before(prev) || p.At.After(s.now.Add(s.policy.Window)) {
				t.Fatalf("retry at %s after %s, window from %s", p.At, prev, s.now)
			}
			prev = p.At
		}
	})
}
