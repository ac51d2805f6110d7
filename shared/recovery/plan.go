package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/declines"
)

// Result is how one charge attempt ended.
type Result string

// The results a charge history records.
const (
	ResultDeclined  Result = "declined"  // a card decline (counts towards Mastercard's decline limits)
	ResultFailed    Result = "failed"    // no decline from the issuer: a provider or network fault
	ResultSucceeded Result = "succeeded" // approved
)

// Charge is one charge attempt in a history. It is JSON because histories travel through
// the recovery state machine.
type Charge struct {
	At     time.Time      `json:"at"`
	Result Result         `json:"outcome"`
	Class  declines.Class `json:"decline_class,omitempty"` // the class of this attempt's decline, if any
	// RetryAfterSeconds is the provider's Retry-After on this attempt's answer; the next
	// attempt is planned exactly that long after it.
	RetryAfterSeconds int64 `json:"retry_after_seconds,omitempty"`
	// Reattempt marks, in CardCharges, a charge that retried an earlier declined one (Visa
	// counts reattempts). In Input.Charges every charge after the first is a reattempt.
	Reattempt bool `json:"reattempt,omitempty"`
	// Card is the fingerprint of the card the attempt charged, when known. The network caps
	// count a charge of Input.Charges only on its own card: a recovery steered to another
	// card does not spend the new card's allowance on the declined card's attempts.
	Card string `json:"card,omitempty"`
}

// Input is what the planner decides from.
type Input struct {
	// Classification is the verdict on the latest decline (declines.Classify).
	Classification declines.Classification `json:"classification"`
	// Charges is this payment's history, oldest first, ending with the attempt that was just
	// declined. The first attempt starts the recovery window.
	Charges []Charge `json:"attempts"`
	// CardCharges are recent charges on the same card for other payments; the network caps
	// are per card. Optional.
	CardCharges []Charge `json:"card_attempts,omitempty"`
	// Card is the fingerprint of the card the planned attempt charges, when known; charges
	// of Charges marked with another card do not count towards its caps.
	Card string `json:"card,omitempty"`
	// AnchorDay is the subscription's billing anchor day of the month (1-31), if any.
	AnchorDay int `json:"anchor_day,omitempty"`
}

// Reason names why a plan retries or stops; the console and the state machine branch on it.
type Reason string

// Retry reasons.
const (
	ReasonFundedMoment Reason = "funded_moment" // insufficient funds: the next payday or billing-cycle boundary
	ReasonNextCycle    Reason = "next_cycle"    // a cycle limit: the next billing-cycle boundary
	ReasonNextDay      Reason = "next_day"      // a daily limit: the next day
	ReasonBackoff      Reason = "backoff"       // technical: exponential backoff with full jitter
	ReasonSpaced       Reason = "spaced"        // generic: days apart
	ReasonAdvisedDelay Reason = "advised_delay" // the network's advised delay (MAC 02, 24-30), exactly
	ReasonRetryAfter   Reason = "retry_after"   // the provider's Retry-After, exactly
)

// Stop reasons.
const (
	ReasonHardDecline   Reason = "hard_decline"   // the issuer will never approve
	ReasonCancelled     Reason = "cancelled"      // the customer revoked the authorization
	ReasonNeedsCustomer Reason = "needs_customer" // the customer must act first
	ReasonNeedsReview   Reason = "needs_review"   // an operator or developer must look
	ReasonExhausted     Reason = "exhausted"      // a cap, the schedule or the window leaves no retry
)

// Limit names a cap that stopped or deferred a retry.
type Limit string

// The limits.
const (
	LimitMaxAttempts   Limit = "max_attempts"   // Policy.MaxAttempts
	LimitWindow        Limit = "window"         // Policy.Window
	LimitSchedule      Limit = "schedule"       // the generic schedule (Policy.GenericGaps) is used up
	LimitVisa30d       Limit = "visa_30d"       // Visa: 20 reattempts per card in 30 days
	LimitMastercard24h Limit = "mastercard_24h" // Mastercard: 10 declines per card in 24 hours
	LimitMastercard30d Limit = "mastercard_30d" // Mastercard: 35 declines per card in 30 days
)

// Plan is the decision about the next attempt. At is UTC in whole seconds.
type Plan struct {
	Retry bool      `json:"retry"`
	At    time.Time `json:"at,omitzero"`
	// Attempt is the number of the planned attempt (the original charge is 1), for the charge's
	// idempotency key; when stopping, the number of attempts made.
	Attempt     int    `json:"attempt"`
	Reason      Reason `json:"reason"`
	Explanation string `json:"explanation"`
	// Limit names the cap that deferred a retry (Retry true) or ended recovery (exhausted).
	Limit         Limit          `json:"limit,omitempty"`
	Class         declines.Class `json:"decline_class"`
	NeedsCustomer bool           `json:"needs_customer"`
	NeedsReview   bool           `json:"needs_review"`
	// ChargeNow links a plan of an operator's retry to its dead-letter record (see RetryLink).
	ChargeNow *RetryLink `json:"charge_now,omitempty"`
}

// LogValue makes a plan one structured log attribute: slog.Any("plan", plan).
func (p Plan) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Bool("retry", p.Retry),
		slog.Int("attempt", p.Attempt),
		slog.String("reason", string(p.Reason)),
		slog.String("decline_class", string(p.Class)),
	}
	if p.Retry {
		attrs = append(attrs, slog.Time("at", p.At))
	}
	if p.Limit != "" {
		attrs = append(attrs, slog.String("limit", string(p.Limit)))
	}
	return slog.GroupValue(attrs...)
}

var _ slog.LogValuer = Plan{}

// ErrNoAttempts is returned for an input with an empty history: there is nothing to retry.
var ErrNoAttempts = errors.New("recovery: no attempts in the history")

// ErrNoRand is returned by NewPlanner without a random source.
var ErrNoRand = errors.New("recovery: NewPlanner needs a random source")

// Planner plans retries with an injected clock and random source. It is safe for concurrent
// use (the source is guarded). Build it with NewPlanner, which validates the policy once.
type Planner struct {
	// Policy's zero fields take their defaults (see DefaultPolicy).
	Policy Policy
	// Now is the clock of Plan (default time.Now).
	Now func() time.Time
	// Rand is the source of jitter (required).
	Rand *rand.Rand

	policy Policy // Policy with its defaults
	mu     *sync.Mutex
}

// NewPlanner validates pl's policy and returns it ready to plan.
func NewPlanner(pl Planner) (*Planner, error) {
	p := pl.Policy.withDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if pl.Rand == nil {
		return nil, ErrNoRand
	}
	pl.policy, pl.mu = p, new(sync.Mutex)
	return &pl, nil
}

func (pl *Planner) now() time.Time {
	if pl.Now == nil {
		return time.Now()
	}
	return pl.Now()
}

// Plan decides the next attempt for in at the planner's current time.
func (pl *Planner) Plan(in Input) (Plan, error) {
	return pl.PlanAt(in, pl.now())
}

// PlanAt decides the next attempt for in at now (a workflow's own time, say).
func (pl *Planner) PlanAt(in Input, now time.Time) (Plan, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return NextAttempt(pl.policy, in, now, pl.Rand)
}

// NextAttempt decides whether and when to retry, as a pure function of its arguments: the same
// inputs and the same random source state give the same plan. A retry is never planned before
// now, never beyond the recovery window, and never where a network cap or Policy.MaxAttempts
// would be broken; a time that would break a cap moves to the first moment the cap allows.
func NextAttempt(p Policy, in Input, now time.Time, rng *rand.Rand) (Plan, error) {
	if len(in.Charges) == 0 {
		return Plan{}, ErrNoAttempts
	}
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	c := in.Classification
	made := len(in.Charges)
	plan := Plan{Attempt: made, Class: c.Class, NeedsCustomer: c.NeedsCustomer, NeedsReview: c.NeedsReview}

	// All three must agree: a classification that arrived as JSON is outside input.
	if !c.Retryable || !c.Action.Retries() || !c.Class.MayRetry() {
		plan.Reason = stopReason(c)
		advice, ok := actionAdvice[c.Action]
		if !ok {
			advice = "a person should look at it"
		}
		plan.Explanation = fmt.Sprintf("Not retrying because %s; %s.", clause(c.Explanation), advice)
		return plan, nil
	}
	if made-1 >= p.MaxAttempts {
		return exhausted(plan, c, LimitMaxAttempts, fmt.Sprintf("the configured maximum of %d retries is used up", p.MaxAttempts)), nil
	}

	last := in.Charges[made-1]
	windowEnd := in.Charges[0].At.Add(p.Window)
	at, reason, why, ok := baseTime(p, in, last, windowEnd, rng)
	if !ok {
		return exhausted(plan, c, LimitSchedule, fmt.Sprintf("the %d spaced retries for this decline are used up", len(p.GenericGaps))), nil
	}
	// Never before now, and always strictly after the decline being planned for (a jitter
	// draw of zero would otherwise repeat the declined second).
	at = latest(at, now, last.At.Add(time.Second))
	at = ceilSecond(at)

	caps := networkCaps(c.Network)
	limit := Limit("")
	for range 2 * len(caps) { // each pass only moves later, so this settles quickly
		moved := false
		for _, cp := range caps {
			if t, ok := cp.earliest(in, at); ok && t.After(at) {
				at, limit, moved = t, cp.limit, true
			}
		}
		if !moved {
			break
		}
	}

	if at.After(windowEnd) {
		cause := fmt.Sprintf("the next retry would fall after the recovery window of %s closes on %s", human(p.Window), p.format(windowEnd))
		if limit != "" {
			cause = fmt.Sprintf("%s allows no retry before the recovery window closes on %s (the card may next be charged on %s)",
				capText[limit], p.format(windowEnd), p.format(at))
		} else {
			limit = LimitWindow
		}
		return exhausted(plan, c, limit, cause), nil
	}

	plan.Retry, plan.At, plan.Attempt, plan.Reason, plan.Limit = true, at.UTC(), made+1, reason, limit
	if limit != "" {
		why += ", moved later to respect " + capText[limit]
	}
	when := p.format(at)
	if at.Sub(now) < time.Hour {
		when = at.In(p.Location).Format("2 Jan at 15:04:05 MST") // minutes away: the seconds matter
	}
	plan.Explanation = fmt.Sprintf("Retrying on %s, %s, because %s.", when, why, clause(c.Explanation))
	return plan, nil
}

// baseTime is the time the decline's own rule asks for, before now and the caps are applied.
// ok is false when the rule has no retries left. Calendar rules (paydays, billing anchors, the
// next day) pick their moment inside the window (see calendarRetry); the others may fall
// beyond it, and NextAttempt then stops.
func baseTime(p Policy, in Input, last Charge, windowEnd time.Time, rng *rand.Rand) (at time.Time, r Reason, why string, ok bool) {
	c := in.Classification
	if last.RetryAfterSeconds > 0 {
		d := seconds(last.RetryAfterSeconds)
		return last.At.Add(d), ReasonRetryAfter, "as the provider's Retry-After of " + human(d) + " asked", true
	}
	switch c.Action {
	case declines.ActionRetryAfter:
		d := seconds(c.DelaySeconds)
		return last.At.Add(d), ReasonAdvisedDelay, "exactly the delay the card network advised (" + human(d) + ")", true
	case declines.ActionRetryWhenFunded, declines.ActionRetryNextCycle:
		days, what := p.Paydays, "the next payday ("+p.paydayList()+")"
		r = ReasonFundedMoment
		if c.Action == declines.ActionRetryNextCycle {
			r, what = ReasonNextCycle, "the next billing-cycle boundary ("+p.paydayList()+")"
		}
		if in.AnchorDay >= 1 && in.AnchorDay <= 31 && (p.UseBillingAnchor || c.Action == declines.ActionRetryNextCycle) {
			days, what = []int{in.AnchorDay}, "the next billing-cycle boundary (the "+ordinal(in.AnchorDay)+")"
		}
		at, why := p.calendarRetry(last.At, days, what, windowEnd, rng)
		return at, r, why, true
	case declines.ActionRetryNextDay:
		at, why := p.calendarRetry(last.At, nil, "the next day, after the daily limit resets", windowEnd, rng)
		return at, ReasonNextDay, why, true
	case declines.ActionRetryBackoff:
		// min(cap, base*2^n), doubling step by step so that it cannot overflow.
		ceiling := p.TechnicalBase
		for n := tail(in.Charges, c.Class) - 1; n > 0 && ceiling < p.TechnicalCap; n-- {
			ceiling *= 2
		}
		ceiling = min(ceiling, p.TechnicalCap)
		return last.At.Add(spread(rng, ceiling)), ReasonBackoff, "after a short backoff with jitter", true
	default: // generic, and any retrying action added later: the cautious, spaced rule
		k := count(in.Charges, c.Class) - 1
		if k >= len(p.GenericGaps) {
			return time.Time{}, "", "", false
		}
		gap := p.GenericGaps[k]
		why := fmt.Sprintf("spaced retry %d of %d, about %s after the last attempt", k+1, len(p.GenericGaps), human(gap))
		return last.At.Add(gap).Add(spread(rng, p.GenericSpread)), ReasonSpaced, why, true
	}
}

// calendarRetry places a calendar retry: at Policy.Hour on the first later day that is one of
// days (nil: the next day), spread over [Hour, Hour+AnchorSpread) but never past windowEnd.
// When that day's slot starts after the window closes, the retry moves to the latest later
// day whose slot starts inside it: the moment closest to the likely-funded one that the window
// still allows, rather than no retry at all. Only when no later day starts inside the window
// (a window shorter than a day or two) is the returned time past windowEnd, and the caller
// stops. what describes the rule's moment; why is the explanation's clause.
func (p Policy) calendarRetry(last time.Time, days []int, what string, windowEnd time.Time, rng *rand.Rand) (at time.Time, why string) {
	slot := p.nextDay(last, days)
	if slot.After(windowEnd) {
		fallback := p.lastSlotBefore(windowEnd)
		if !laterLocalDay(fallback, last, p.Location) {
			return slot, what // past the window: NextAttempt stops and says why
		}
		why = fmt.Sprintf("the last morning inside the recovery window, as %s on %s falls after it closes", what, p.format(slot))
		slot = fallback
	} else {
		why = what
	}
	// The spread ends at the window's last whole second, so ceilSecond cannot push it out.
	width := min(p.AnchorSpread, windowEnd.Truncate(time.Second).Sub(slot))
	return slot.Add(spread(rng, width)), why
}

// lastSlotBefore is Hour o'clock in Location on the latest day where that moment is not
// after end.
func (p Policy) lastSlotBefore(end time.Time) time.Time {
	l := end.In(p.Location)
	for i := 0; ; i++ {
		d := time.Date(l.Year(), l.Month(), l.Day()-i, p.Hour, 0, 0, 0, p.Location)
		if !d.After(end) {
			return d
		}
	}
}

// laterLocalDay reports whether a falls on a later calendar day than b in loc.
func laterLocalDay(a, b time.Time, loc *time.Location) bool {
	ay, am, ad := a.In(loc).Date()
	by, bm, bd := b.In(loc).Date()
	return time.Date(ay, am, ad, 0, 0, 0, 0, time.UTC).After(time.Date(by, bm, bd, 0, 0, 0, 0, time.UTC))
}

func latest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// seconds converts a delay from outside input; a delay beyond any window is clamped so that
// it cannot overflow into the past.
func seconds(n int64) time.Duration {
	const max = int64(400 * 24 * 3600)
	return time.Duration(min(n, max)) * time.Second
}

// tail counts the attempts at the end of the history with this class; the latest decline
// counts even if its class was not recorded.
func tail(as []Charge, class declines.Class) int {
	n := 1
	for i := len(as) - 2; i >= 0 && as[i].Class == class; i-- {
		n++
	}
	return n
}

// count counts the attempts with this class, the latest one always included.
func count(as []Charge, class declines.Class) int {
	n := 1
	for _, a := range as[:len(as)-1] {
		if a.Class == class {
			n++
		}
	}
	return n
}

// spread is a uniform random duration in [0, d): full jitter when d is the backoff ceiling.
func spread(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

func ceilSecond(t time.Time) time.Time {
	if u := t.Truncate(time.Second); u.Before(t) {
		return u.Add(time.Second)
	}
	return t
}

func stopReason(c declines.Classification) Reason {
	switch {
	case c.Class == declines.ClassCancellation:
		return ReasonCancelled
	case c.NeedsReview:
		return ReasonNeedsReview
	case c.NeedsCustomer:
		return ReasonNeedsCustomer
	}
	return ReasonHardDecline
}

func exhausted(plan Plan, c declines.Classification, limit Limit, cause string) Plan {
	plan.Retry, plan.Reason, plan.Limit = false, ReasonExhausted, limit
	plan.Explanation = fmt.Sprintf("Not retrying because %s (last decline: %s); ask the customer to pay or update their payment method.", cause, c.Reason)
	return plan
}

// actionAdvice completes "Not retrying because ...; " for a decline that is never retried.
var actionAdvice = map[declines.Action]string{
	declines.ActionStop:             "this card cannot be charged again",
	declines.ActionNewPaymentMethod: "the customer needs to add a new payment method",
	declines.ActionAskCustomer:      "the customer needs to contact their card issuer or use another card",
	declines.ActionUpdateCard:       "the customer needs to correct the card details",
	declines.ActionAccountUpdater:   "the card details need updating, from the network's account updater or the customer",
	declines.ActionAuthenticate:     "the customer needs to authenticate the payment through a payment link",
	declines.ActionTreatAsCancelled: "treat it as the customer cancelling",
	declines.ActionReview:           "an operator should review it",
	declines.ActionFixIntegration:   "the integration needs fixing",
}

// clause turns a classification's sentence into a clause: "The card issuer declined: x." ->
// "the card issuer declined: x".
func clause(s string) string {
	if s == "" || s == "." {
		return "the payment was declined"
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if strings.HasPrefix(s, "The ") {
		s = "the " + s[len("The "):]
	}
	return s
}

// human prints a duration the way a console reader counts: "14 days", "1 hour", "90 seconds".
func human(d time.Duration) string {
	unit := func(n time.Duration, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return unit(d/(24*time.Hour), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return unit(d/time.Hour, "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return unit(d/time.Minute, "minute")
	}
	return unit(d/time.Second, "second")
}
