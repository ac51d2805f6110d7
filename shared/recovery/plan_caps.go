package recovery

import (
	"sort"
	"time"

	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/declines"
)

// windowCap is a network's excessive-attempt rule: fewer than max counted attempts on the card
// in any window of length per, the planned one included.
type windowCap struct {
	limit Limit
	max   int
	per   time.Duration
	// counts says whether a charge counts; i is its index in Input.Charges, or -1 for
	// Input.CardCharges.
	counts func(a Charge, i int) bool
}

// capText completes "... to respect " and "... allows no retry".
var capText = map[Limit]string{
	LimitVisa30d:       "Visa's limit of 20 reattempts per card in 30 days",
	LimitMastercard24h: "Mastercard's limit of 10 declines per card in 24 hours",
	LimitMastercard30d: "Mastercard's limit of 35 declines per card in 30 days",
}

func reattempt(a Charge, i int) bool { return i > 0 || (i < 0 && a.Reattempt) }
func declined(a Charge, _ int) bool  { return a.Result == ResultDeclined }

// networkCaps returns the caps of a card network, from the card ledger's rules (one home for
// the networks' numbers). Networks without published rules get only our own caps.
func networkCaps(n declines.Network) []windowCap {
	var out []windowCap
	for _, c := range cardledger.Caps(string(n)) {
		counts := declined
		if c.Counts == cardledger.CountReattempts {
			counts = reattempt // a reattempt counts whatever its outcome; the planned one is one
		}
		out = append(out, windowCap{Limit(c.Limit), c.Max, c.Per, counts})
	}
	return out
}

// earliest returns the first moment at or after t when one more attempt keeps the count in
// the trailing window below max, and whether the cap applies at all. An attempt at time a
// is in the window ending at t when a > t-per.
func (c windowCap) earliest(in Input, t time.Time) (time.Time, bool) {
	var times []time.Time
	for i, a := range in.Charges {
		if in.Card != "" && a.Card != "" && a.Card != in.Card {
			continue // made on another card: that card's caps, not this one's
		}
		if c.counts(a, i) {
			times = append(times, a.At)
		}
	}
	for _, a := range in.CardCharges {
		if c.counts(a, -1) {
			times = append(times, a.At)
		}
	}
	var inWindow []time.Time
	for _, a := range times {
		if a.After(t.Add(-c.per)) {
			inWindow = append(inWindow, a)
		}
	}
	over := len(inWindow) - (c.max - 1) // how many must leave the window
	if over <= 0 {
		return t, true
	}
	sort.Slice(inWindow, func(i, j int) bool { return inWindow[i].Before(inWindow[j]) })
	// The over-th oldest leaves the window once t-per reaches it.
	return ceilSecond(inWindow[over-1].Add(c.per)), true
}
