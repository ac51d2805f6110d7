package harness

import (
	"fmt"
	"sort"
)

// Observation is what the clients and the final reads know of one logical payment.
type Observation struct {
	Key      string
	ID       string   // the payment id the key names
	Accepted bool     // a 201, 402 or 202 at least once
	Finals   []Answer // every final answer, in order
	Found    bool     // GET /payments/{id} answered 200 at the end
	Status   string   // the local status at the end
	// Recoverable says its card was programmed to decline a few times, then succeed.
	Recoverable bool
	// Unheard says every webhook about it was dropped and its charge was left processing, to
	// be settled at the provider later (Plan.Unheard).
	Unheard bool
}

// Findings are the invariant checks over a run. Every count except Unanswered must be zero.
type Findings struct {
	DoubleCharges    int `json:"double_charges"`
	Lost             int `json:"lost_payments"`
	ReplayMismatches int `json:"replay_mismatches"`
	StatusMismatches int `json:"status_mismatches"`
	// NotRecovered counts recoverable payments that did not end succeeded.
	NotRecovered int `json:"recoverable_not_recovered"`
	// UnnamedStops counts recoveries that ended without a named reason (Recoveries.Unnamed).
	UnnamedStops int `json:"recoveries_ended_without_a_named_reason"`
	// Unanswered counts payments no request ever got accepted (every try failed within the
	// client's bounds): not an invariant, the client was told to retry.
	Unanswered int `json:"unanswered"`
	// Unsettled counts payments still pending when a run cut off by its time bound ended:
	// not judged, since the stack was not given the time to settle them.
	Unsettled int `json:"unsettled,omitempty"`
	// UnheardBehind counts the unheard payments settled at the provider whose local status is
	// not the provider's after the backfill (each is a status mismatch too): only the
	// provider's event log could tell the stack, so the backfill did not bring it.
	UnheardBehind int `json:"unheard_behind_after_backfill"`
	// BackfillIdle is 1 when unheard payments reached the provider and the backfill applied no
	// event at all (Run sets it; Check cannot know).
	BackfillIdle int `json:"backfill_applied_nothing"`
	// FollowOnsLost counts follow-on effects committed but never carried out (an outbox message
	// never delivered, a declined payment with no recovery), read after the stack settled.
	FollowOnsLost int `json:"follow_on_effects_lost"`
	// Examples names the first broken cases, for a person to reproduce.
	Examples []string `json:"examples,omitempty"`
}

const maxExamples = 10

func (f *Findings) example(format string, args ...any) {
	if len(f.Examples) < maxExamples {
		f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
	}
}

// Check compares what the clients saw and the stack answers with the simulator's own records.
// settled says the stack was given its time to settle; when it was not, a payment still pending
// is counted Unsettled rather than lost.
func Check(obs []Observation, intents []Intent, settled bool) Findings {
	var f Findings
	byPayment := map[string][]Intent{}
	for _, in := range intents {
		byPayment[in.PaymentID] = append(byPayment[in.PaymentID], in)
	}
	known := map[string]bool{}
	for _, o := range obs {
		if o.ID != "" {
			known[o.ID] = true
		}
		pis := byPayment[o.ID]
		succeeded := 0
		for _, in := range pis {
			if in.Status == "succeeded" {
				succeeded++
			}
		}
		if o.ID != "" && succeeded > 1 {
			f.DoubleCharges++
			f.example("double charge: key %s payment %s has %d succeeded PaymentIntents", o.Key, o.ID, succeeded)
		}
		if !o.Accepted {
			if providerStatus(pis) == "succeeded" && !o.Found {
				f.Lost++
				f.example("lost: key %s payment %s was charged at the provider but the stack answers 404", o.Key, o.ID)
				continue
			}
			f.Unanswered++
			continue
		}
		switch {
		case !o.Found:
			f.Lost++
			f.example("lost: key %s payment %s was accepted but GET answers 404", o.Key, o.ID)
			continue
		case !settled && stillMoving(o.Status):
			f.Unsettled++
			continue
		case o.Status == "pending" || o.Status == "":
			f.Lost++
			f.example("lost: key %s payment %s is still %q after settling", o.Key, o.ID, o.Status)
			continue
		}
		for _, a := range o.Finals[min(1, len(o.Finals)):] {
			if a != o.Finals[0] {
				f.ReplayMismatches++
				f.example("replay mismatch: key %s first %d %s, later %d %s", o.Key, o.Finals[0].Status, o.Finals[0].Body, a.Status, a.Body)
			}
		}
		if o.Recoverable && o.Status != "succeeded" {
			switch {
			case o.Status == "canceled" && len(pis) == 0:
				// Pending past the key horizon and never at the provider: it never declined,
				// so there was nothing to recover (Run leaves it out of the recoverable count).
			case !settled && o.Status == "declined":
				f.Unsettled++ // its recovery was not given the time
			default:
				f.NotRecovered++
				f.example("not recovered: key %s payment %s is %q; its card declines only a few times", o.Key, o.ID, o.Status)
			}
		}
		if len(pis) == 0 && o.Status == "canceled" {
			// Pending past the provider's key horizon and not found there: canceled without a
			// charge, and nothing created again under its key. Consistent.
			continue
		}
		if want := providerStatus(pis); want != o.Status {
			f.StatusMismatches++
			f.example("status mismatch: key %s payment %s is %q locally, %q at the provider (%d intents)", o.Key, o.ID, o.Status, want, len(pis))
			if o.Unheard && want != "processing" {
				f.UnheardBehind++
				f.example("unheard payment behind: key %s payment %s, settled %q at the provider, is %q after the backfill", o.Key, o.ID, want, o.Status)
			}
		}
	}
	// A charge the stack does not know about is a lost payment too: the provider took money
	// for a request the stack cannot answer for.
	var orphans []string
	for id, pis := range byPayment {
		if !known[id] && providerStatus(pis) == "succeeded" {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	for _, id := range orphans {
		f.Lost++
		f.example("lost: the provider charged payment %q that no accepted answer named", id)
	}
	return f
}

// providerStatus is the local status the provider's intents of one payment imply: succeeded if
// any succeeded (refunded once its refunds add up to what it captured), else that of the
// newest ("" when the provider holds none). Intents come newest first from the list.
func providerStatus(pis []Intent) string {
	if len(pis) == 0 {
		return ""
	}
	for _, in := range pis {
		if in.Status == "succeeded" {
			if in.AmountReceived > 0 && in.Refunded >= in.AmountReceived {
				return "refunded"
			}
			return "succeeded"
		}
	}
	return LocalStatus(pis[0].Status)
}

// Broken lists the invariants that failed.
func (f Findings) Broken() []string {
	var out []string
	for _, c := range []struct {
		name string
		n    int
	}{{"double charges", f.DoubleCharges}, {"lost payments", f.Lost}, {"replay mismatches", f.ReplayMismatches}, {"status mismatches", f.StatusMismatches},
		{"follow-on effects lost", f.FollowOnsLost}, {"recoverable payments not recovered", f.NotRecovered}, {"recoveries ended without a named reason", f.UnnamedStops},
		{"unheard payments behind after backfill", f.UnheardBehind}, {"backfill applied nothing of the unheard changes", f.BackfillIdle}} {
		if c.n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", c.name, c.n))
		}
	}
	return out
}
