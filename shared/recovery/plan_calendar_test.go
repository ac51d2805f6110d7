package recovery

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the sweep's daylight-saving zone, whatever the machine has installed

	"github.com/runtwice/twice/shared/declines"
)

// sweepDeclines are the declines the calendar sweep plans for: one per timing rule, and each
// way of stopping. The card network is drawn over separately.
var sweepDeclines = []struct {
	name string
	d    declines.Decline
}{
	{"funds", declines.Decline{Code: "insufficient_funds"}},
	{"daily limit", declines.Decline{Code: "card_velocity_exceeded"}},
	{"count limit", declines.Decline{Code: "withdrawal_count_limit_exceeded"}},
	{"cycle limit", declines.Decline{Code: "invalid_amount"}},
	{"technical", declines.Decline{Code: "processing_error"}},
	{"generic", declines.Decline{Code: "do_not_honor"}},
	{"unknown code", declines.Decline{Code: "brand_new_code"}},
	{"try again later", declines.Decline{Code: "generic_decline", AdviceCode: "try_again_later"}},
	{"MAC 02", declines.Decline{Code: "do_not_honor", NetworkAdviceCode: "02"}},
	{"MAC 24", declines.Decline{Code: "do_not_honor", NetworkAdviceCode: "24"}},
	{"MAC 30", declines.Decline{Code: "insufficient_funds", NetworkAdviceCode: "30"}},
	{"MAC 03", declines.Decline{Code: "do_not_honor", NetworkAdviceCode: "03"}},
	{"hard", declines.Decline{Code: "lost_card"}},
	{"data", declines.Decline{Code: "expired_card"}},
	{"auth", declines.Decline{Code: "authentication_required"}},
	{"cancellation", declines.Decline{Code: "revocation_of_authorization"}},
	{"review", declines.Decline{Code: "duplicate_transaction"}},
	{"config", declines.Decline{Code: "testmode_decline"}},
	{"do not try again", declines.Decline{Code: "insufficient_funds", AdviceCode: "do_not_try_again"}},
}

var sweepNetworks = []declines.Network{declines.NetworkVisa, declines.NetworkMastercard, declines.NetworkAmex, declines.NetworkUnknown}

// TestCalendarSweep declines every rule's card at every hour of four calendar years
// (2026-2029; 2028 is a leap year), in UTC and in New York (daylight saving moves 09:00
// between 13:00 and 14:00 UTC), on every card network, and follows the default policy's
// whole schedule for a card that declines every time. The minute of each decline moves
// through the hour, so 08:59 and 09:01 on paydays come up; TestCalendarEdges names them.
//
// For every case: a hard or needs-someone decline is never retried; a soft one gets at least
// one retry inside the window; every retry is strictly after the attempt before it and inside
// the window, in whole UTC seconds; jitter stays inside each rule's stated bounds; every stop
// names its limit in the explanation.
func TestCalendarSweep(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	stride := time.Hour
	if testing.Short() || raceEnabled {
		stride = 5 * time.Hour // every hour of the day still comes up, on other days
	}
	var mu sync.Mutex
	cases, plans, retries := 0, 0, 0
	for year := 2026; year <= 2029; year++ {
		t.Run(strconv.Itoa(year), func(t *testing.T) {
			t.Parallel()
			c, p, r := sweepYear(t, year, stride, newYork)
			mu.Lock()
			defer mu.Unlock()
			cases, plans, retries = cases+c, plans+p, retries+r
		})
	}
	t.Cleanup(func() {
		if !t.Failed() {
			t.Logf("calendar sweep: %d cases (decline hour, decline, network, zone), %d plans, %d retries checked, 0 violations", cases, plans, retries)
		}
	})
}

// sweepYear sweeps one year's hours. In UTC every decline is planned on every network; only
// the calendar rules depend on the zone, so New York sweeps those. The whole schedule is
// followed on one network per hour (rotating), the first plan on the others: networks change
// timing only through their caps, which one recovery never reaches, and advice codes.
func sweepYear(t *testing.T, year int, stride time.Duration, newYork *time.Location) (cases, plans, retries int) {
	type variant struct {
		name string
		cs   []declines.Classification // one per network
	}
	var all, calendar []variant
	for _, sd := range sweepDeclines {
		v := variant{name: sd.name}
		for _, n := range sweepNetworks {
			d := sd.d
			d.Network = n
			v.cs = append(v.cs, declines.Classify(d))
		}
		all = append(all, v)
		switch v.cs[0].Action {
		case declines.ActionRetryWhenFunded, declines.ActionRetryNextCycle, declines.ActionRetryNextDay:
			calendar = append(calendar, v)
		}
	}
	start := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, zone := range []struct {
		loc      *time.Location
		variants []variant
	}{{time.UTC, all}, {newYork, calendar}} {
		p := DefaultPolicy()
		p.Location = zone.loc
		i := 0
		for h := start; h.Before(end); h = h.Add(stride) {
			i++
			at := h.Add(time.Duration(i%60)*time.Minute + time.Duration(i%7)*time.Second)
			for _, v := range zone.variants {
				for ni, c := range v.cs {
					if zone.loc != time.UTC && ni != i%len(v.cs) {
						continue
					}
					n, r, err := sweepOne(p, c, at, uint64(i), ni == i%len(v.cs))
					if err != nil {
						t.Fatalf("%s, %s, %s, declined %s (%s): %v", v.name, c.Network, zone.loc, at.In(zone.loc).Format(time.RFC3339), at.Weekday(), err)
					}
					cases, plans, retries = cases+1, plans+n, retries+r
				}
			}
		}
	}
	return cases, plans, retries
}

// sweepOne checks the schedule from one decline; full follows it to the end, otherwise only
// the first plan. It returns the plans and retries checked.
func sweepOne(p Policy, c declines.Classification, first time.Time, seed uint64, full bool) (int, int, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	in := Input{Classification: c, Charges: []Charge{{At: first, Result: ResultDeclined, Class: c.Class}}}
	windowEnd := first.Add(p.Window)
	now := first
	retries := 0
	for n := 1; ; n++ {
		plan, err := NextAttempt(p, in, now, rng)
		if err != nil {
			return n, retries, err
		}
		if err := checkPlan(p, in, plan, windowEnd); err != nil {
			return n, retries, fmt.Errorf("plan %d %+v: %w", n, plan, err)
		}
		if !plan.Retry {
			return n, retries, nil
		}
		retries++
		if !full {
			return n, retries, nil
		}
		if n > p.MaxAttempts+1 {
			return n, retries, fmt.Errorf("%d plans for %d retries allowed", n, p.MaxAttempts)
		}
		now = plan.At
		in.Charges = append(in.Charges, Charge{At: plan.At, Result: ResultDeclined, Class: c.Class})
	}
}

// checkPlan is the sweep's verdict on one plan, written from the stated rules rather than
// from the planner's code.
func checkPlan(p Policy, in Input, plan Plan, windowEnd time.Time) error {
	c := in.Classification
	last := in.Charges[len(in.Charges)-1]
	soft := c.Retryable && c.Class.MayRetry() && c.Action.Retries()
	if !soft {
		if plan.Retry {
			return fmt.Errorf("a %s decline (%s) was retried", c.Class, c.Action)
		}
		return nil
	}
	if !plan.Retry {
		if len(in.Charges) == 1 {
			return fmt.Errorf("a soft decline got no retry at all: %s", plan.Explanation)
		}
		if plan.Reason != ReasonExhausted || plan.Limit == "" {
			return fmt.Errorf("a stop without a named limit: %s", plan.Reason)
		}
		if want := limitWords[plan.Limit]; !strings.Contains(plan.Explanation, want) {
			return fmt.Errorf("the explanation %q does not name the limit (%q)", plan.Explanation, want)
		}
		return nil
	}
	switch {
	case !plan.At.After(last.At):
		return fmt.Errorf("retry at %s not after the decline at %s", plan.At, last.At)
	case plan.At.After(windowEnd):
		return fmt.Errorf("retry at %s after the window closes at %s", plan.At, windowEnd)
	case plan.At.Location() != time.UTC || plan.At.Nanosecond() != 0:
		return fmt.Errorf("at %v is not whole UTC seconds", plan.At)
	case len(in.Charges) > p.MaxAttempts:
		return fmt.Errorf("retry %d beyond the maximum of %d", len(in.Charges), p.MaxAttempts)
	case plan.Explanation == "" || !strings.HasPrefix(plan.Explanation, "Retrying on "):
		return fmt.Errorf("explanation %q", plan.Explanation)
	}
	if plan.Limit != "" {
		return nil // moved by a network cap: the rule's own bounds no longer apply
	}
	between := func(lo, hi time.Time) error {
		lo, hi = ceilSecond(latest(lo, last.At.Add(time.Second))), ceilSecond(hi)
		if plan.At.Before(lo) || plan.At.After(hi) {
			return fmt.Errorf("%s retry at %s outside [%s, %s]", plan.Reason, plan.At, lo, hi)
		}
		return nil
	}
	switch c.Action {
	case declines.ActionRetryAfter:
		if want := ceilSecond(last.At.Add(time.Duration(c.DelaySeconds) * time.Second)); !plan.At.Equal(want) {
			return fmt.Errorf("advised delay: at %s, want exactly %s", plan.At, want)
		}
		return nil
	case declines.ActionRetryBackoff:
		n := 0
		for i := len(in.Charges) - 2; i >= 0 && in.Charges[i].Class == c.Class; i-- {
			n++
		}
		ceiling := time.Duration(math.Min(float64(p.TechnicalCap), math.Ldexp(float64(p.TechnicalBase), n)))
		return between(last.At, last.At.Add(ceiling))
	case declines.ActionRetrySpaced:
		gap := p.GenericGaps[len(in.Charges)-1]
		return between(last.At.Add(gap), last.At.Add(gap+p.GenericSpread))
	}
	// Calendar rules: Hour o'clock local on a later day, plus at most AnchorSpread.
	local := plan.At.In(p.Location)
	slot := time.Date(local.Year(), local.Month(), local.Day(), p.Hour, 0, 0, 0, p.Location)
	if err := between(slot, slot.Add(p.AnchorSpread)); err != nil {
		return err
	}
	if !laterLocalDay(slot, last.At, p.Location) {
		return fmt.Errorf("calendar retry at %s on the decline's own day (%s)", plan.At, last.At)
	}
	wanted := map[declines.Action]func(time.Time) bool{
		declines.ActionRetryWhenFunded: func(d time.Time) bool { return isPayday(d, p.Paydays) },
		declines.ActionRetryNextCycle:  func(d time.Time) bool { return isPayday(d, p.Paydays) },
		declines.ActionRetryNextDay:    func(time.Time) bool { return true },
	}[c.Action]
	if wanted == nil {
		return fmt.Errorf("no timing rule checked for action %s", c.Action)
	}
	// The first wanted day after the decline, or, when its slot starts after the window
	// closes, the latest day whose slot starts inside it.
	d := time.Date(last.At.In(p.Location).Year(), last.At.In(p.Location).Month(), last.At.In(p.Location).Day()+1, p.Hour, 0, 0, 0, p.Location)
	for !wanted(d) {
		d = time.Date(d.Year(), d.Month(), d.Day()+1, p.Hour, 0, 0, 0, p.Location)
	}
	if d.After(windowEnd) {
		d = time.Date(windowEnd.In(p.Location).Year(), windowEnd.In(p.Location).Month(), windowEnd.In(p.Location).Day(), p.Hour, 0, 0, 0, p.Location)
		if d.After(windowEnd) {
			d = time.Date(d.Year(), d.Month(), d.Day()-1, p.Hour, 0, 0, 0, p.Location)
		}
		if !strings.Contains(plan.Explanation, "the last morning inside the recovery window") {
			return fmt.Errorf("a fallback retry not explained as one: %q", plan.Explanation)
		}
	}
	if !slot.Equal(d) {
		return fmt.Errorf("%s retry on %s, want the day of %s", plan.Reason, slot, d)
	}
	return nil
}

// isPayday reports whether d's day of the month is one of days, a day past the month's end
// meaning its last day.
func isPayday(d time.Time, days []int) bool {
	last := time.Date(d.Year(), d.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
	for _, want := range days {
		if d.Day() == want || (want > last && d.Day() == last) {
			return true
		}
	}
	return false
}

// limitWords is what a stop's explanation must say for each limit.
var limitWords = map[Limit]string{
	LimitMaxAttempts:   "maximum",
	LimitWindow:        "recovery window",
	LimitSchedule:      "spaced retries",
	LimitVisa30d:       "Visa",
	LimitMastercard24h: "Mastercard",
	LimitMastercard30d: "Mastercard",
}

// TestCalendarEdges names the edges of the calendar: a decline just before, at and just after
// 09:00 on a payday, on month ends (28 to 31 days, February 29), across daylight-saving
// changes, with paydays past the window.
func TestCalendarEdges(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	funds := declines.Classify(declines.Decline{Code: "insufficient_funds", Network: declines.NetworkVisa})
	daily := declines.Classify(declines.Decline{Code: "card_velocity_exceeded", Network: declines.NetworkVisa})
	tests := map[string]struct {
		loc      *time.Location
		c        declines.Classification
		declined time.Time
		// wantDay is the local day of the first retry (the spread is off: exactly 09:00).
		wantDay  time.Time
		fallback bool
	}{
		"the 1st at 08:59: the 15th at 09:00 is a minute past the window, so the 14th": {c: funds, declined: utc(2026, 12, 1, 8, 59),
			wantDay: utc(2026, 12, 14, 9, 0), fallback: true},
		"the 1st at 09:01 waits for the 15th": {c: funds, declined: utc(2026, 12, 1, 9, 1), wantDay: utc(2026, 12, 15, 9, 0)},
		"the 15th at 08:59: the 1st is past the window, so the 29th": {c: funds, declined: utc(2026, 12, 15, 8, 59),
			wantDay: utc(2026, 12, 28, 9, 0), fallback: true},
		"the 15th at 09:01: the 29th at 09:00 is inside the window": {c: funds, declined: utc(2026, 12, 15, 9, 1),
			wantDay: utc(2026, 12, 29, 9, 0), fallback: true},
		"the 17th: the 1st is 15 days away, so the 31st": {c: funds, declined: utc(2026, 12, 17, 12, 0), wantDay: utc(2026, 12, 31, 9, 0), fallback: true},
		"the 18th: the 1st is inside the window":         {c: funds, declined: utc(2026, 12, 18, 12, 0), wantDay: utc(2027, 1, 1, 9, 0)},
		"February 15th in a leap year: 1 March is 15 days away": {c: funds, declined: utc(2028, 2, 15, 12, 0),
			wantDay: utc(2028, 2, 29, 9, 0), fallback: true},
		"February 16th in a common year: 1 March is inside":      {c: funds, declined: utc(2027, 2, 16, 12, 0), wantDay: utc(2027, 3, 1, 9, 0)},
		"February 28th in a leap year: the next day is the 29th": {c: daily, declined: utc(2028, 2, 28, 23, 0), wantDay: utc(2028, 2, 29, 9, 0)},
		"31 January: the daily limit retries on 1 February":      {c: daily, declined: utc(2027, 1, 31, 10, 0), wantDay: utc(2027, 2, 1, 9, 0)},
		"30 April: the 1st is the next morning":                  {c: funds, declined: utc(2027, 4, 30, 12, 0), wantDay: utc(2027, 5, 1, 9, 0)},
		"New York, spring forward: 09:00 EDT is 13:00 UTC": {loc: newYork, c: funds, declined: utc(2027, 3, 2, 15, 0),
			wantDay: time.Date(2027, 3, 15, 9, 0, 0, 0, newYork)},
		"New York, fall back: 09:00 EST is 14:00 UTC": {loc: newYork, c: funds, declined: utc(2027, 11, 1, 15, 0),
			wantDay: time.Date(2027, 11, 15, 9, 0, 0, 0, newYork)},
		"New York, 1st at 09:01 local, already the 1st in UTC": {loc: newYork, c: funds, declined: time.Date(2027, 6, 1, 9, 1, 0, 0, newYork),
			wantDay: time.Date(2027, 6, 15, 9, 0, 0, 0, newYork)},
		"New York, 31st at 22:00 local, the 1st in UTC": {loc: newYork, c: funds, declined: time.Date(2027, 5, 31, 22, 0, 0, 0, newYork),
			wantDay: time.Date(2027, 6, 1, 9, 0, 0, 0, newYork)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := DefaultPolicy()
			p.AnchorSpread = 0
			if tc.loc != nil {
				p.Location = tc.loc
			}
			in := Input{Classification: tc.c, Charges: []Charge{{At: tc.declined, Result: ResultDeclined, Class: tc.c.Class}}}
			plan, err := NextAttempt(p, in, tc.declined, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Retry || !plan.At.Equal(tc.wantDay) {
				t.Fatalf("plan %+v, want a retry at %s", plan, tc.wantDay.UTC())
			}
			if got := strings.Contains(plan.Explanation, "last morning inside the recovery window"); got != tc.fallback {
				t.Fatalf("fallback %v, want %v: %s", got, tc.fallback, plan.Explanation)
			}
			if err := checkPlan(p, in, plan, tc.declined.Add(p.Window)); err != nil {
				t.Fatal(err)
			}
			t.Log(plan.Explanation)
		})
	}
}
