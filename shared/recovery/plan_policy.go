package recovery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Policy is the configured retry policy. It is configuration, not state: build it once from
// settings with DefaultPolicy and override fields. Zero durations, counts and lists take the
// defaults; Hour is taken as given (0 is midnight).
type Policy struct {
	// MaxAttempts caps the automatic retries in one recovery, not counting the original charge.
	MaxAttempts int
	// Window is how long after the original charge a retry may still happen.
	Window time.Duration
	// Paydays are the days of the month when funds are likely (a day past a month's end means
	// its last day). Insufficient funds retries at the next one.
	Paydays []int
	// UseBillingAnchor makes insufficient funds wait for the subscription's anchor day
	// (Input.AnchorDay) instead of the paydays, when the input has one.
	UseBillingAnchor bool
	// Hour and Location place calendar retries (paydays, anchor days, next day).
	Hour     int
	Location *time.Location
	// AnchorSpread spreads calendar retries uniformly over [0, AnchorSpread) after Hour, so
	// that every card declined for funds is not retried in the same second.
	AnchorSpread time.Duration
	// TechnicalBase and TechnicalCap shape the backoff for technical declines: the n-th
	// consecutive one waits random(0, min(TechnicalCap, TechnicalBase*2^n)) (full jitter).
	TechnicalBase, TechnicalCap time.Duration
	// GenericGaps are the gaps before each retry of a generic decline; when they are used up
	// the recovery is exhausted and the customer is asked.
	GenericGaps []time.Duration
	// GenericSpread is the random extra in [0, GenericSpread) added to each generic gap.
	GenericSpread time.Duration
}

const day = 24 * time.Hour

// DefaultPolicy is Stripe's recommended shape (8 tries within 2 weeks) with the
// reference's timing: paydays on the 1st and 15th at 09:00 UTC; technical backoff from
// 1 minute capped at 1 hour; generic retries 1, 3, 5 and 7 days after the first decline.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:   8,
		Window:        14 * day,
		Paydays:       []int{1, 15},
		Hour:          9,
		Location:      time.UTC,
		AnchorSpread:  time.Hour,
		TechnicalBase: time.Minute,
		TechnicalCap:  time.Hour,
		GenericGaps:   []time.Duration{1 * day, 2 * day, 2 * day, 2 * day},
		GenericSpread: 6 * time.Hour,
	}
}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.Window == 0 {
		p.Window = d.Window
	}
	if len(p.Paydays) == 0 {
		p.Paydays = d.Paydays
	}
	if p.Location == nil {
		p.Location = d.Location
	}
	if p.TechnicalBase == 0 {
		p.TechnicalBase = d.TechnicalBase
	}
	if p.TechnicalCap == 0 {
		p.TechnicalCap = d.TechnicalCap
	}
	if len(p.GenericGaps) == 0 {
		p.GenericGaps = d.GenericGaps
	}
	return p
}

// ErrInvalidPolicy is the sentinel every policy validation error wraps.
var ErrInvalidPolicy = errors.New("recovery: invalid policy")

// Validate reports the first setting that cannot work.
func (p Policy) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...)
	}
	switch {
	case p.MaxAttempts < 1:
		return bad("MaxAttempts %d < 1", p.MaxAttempts)
	case p.Window < time.Hour:
		return bad("Window %s shorter than an hour", p.Window)
	case p.Hour < 0 || p.Hour > 23:
		return bad("Hour %d outside 0-23", p.Hour)
	case p.Location == nil:
		return bad("no Location")
	case p.AnchorSpread < 0 || p.AnchorSpread > day:
		return bad("AnchorSpread %s outside 0-24h", p.AnchorSpread)
	case p.TechnicalBase <= 0 || p.TechnicalCap < p.TechnicalBase:
		return bad("technical backoff base %s, cap %s", p.TechnicalBase, p.TechnicalCap)
	case p.GenericSpread < 0:
		return bad("GenericSpread %s < 0", p.GenericSpread)
	}
	for _, d := range p.Paydays {
		if d < 1 || d > 31 {
			return bad("payday %d outside 1-31", d)
		}
	}
	for _, g := range p.GenericGaps {
		if g <= 0 {
			return bad("generic gap %s <= 0", g)
		}
	}
	return nil
}

// nextDay is Hour o'clock in Location on the first calendar day after t's that is one of
// days; nil days means simply the next day. A later calendar day, never later the same day:
// a retry for funds hours after the decline rarely finds them.
func (p Policy) nextDay(t time.Time, days []int) time.Time {
	l := t.In(p.Location)
	for i := 1; i <= 62; i++ {
		d := time.Date(l.Year(), l.Month(), l.Day()+i, p.Hour, 0, 0, 0, p.Location)
		if days == nil || matchesDay(d, days) {
			return d
		}
	}
	// Unreachable with days in 1-31 (every month has a 1st), kept total for safety.
	return time.Date(l.Year(), l.Month(), l.Day()+1, p.Hour, 0, 0, 0, p.Location)
}

func matchesDay(d time.Time, days []int) bool {
	last := time.Date(d.Year(), d.Month()+1, 0, 0, 0, 0, 0, d.Location()).Day()
	for _, want := range days {
		if d.Day() == want || (want > last && d.Day() == last) {
			return true
		}
	}
	return false
}

// paydayList is "the 1st or 15th of the month".
func (p Policy) paydayList() string {
	parts := make([]string, len(p.Paydays))
	for i, d := range p.Paydays {
		parts[i] = ordinal(d)
	}
	list := parts[0]
	if len(parts) > 1 {
		list = strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
	}
	return "the " + list + " of the month"
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// format prints a time for the console: "1 Dec at 09:00 UTC".
func (p Policy) format(t time.Time) string {
	return t.In(p.Location).Format("2 Jan at 15:04 MST")
}
