package recovery

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/declines"
)

var now = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC) // a Sunday

func seeded() *rand.Rand { return rand.New(rand.NewPCG(7, 11)) }

// firstDraw is what seeded() yields first for a uniform draw in [0, d): the expected jitter.
func firstDraw(d time.Duration) time.Duration { return time.Duration(seeded().Int64N(int64(d))) }

func classify(code string, network declines.Network) declines.Classification {
	return declines.Classify(declines.Decline{Code: code, Network: network})
}

// history is n attempts of the same class, the last at last, each gap apart.
func history(c declines.Classification, n int, last time.Time, gap time.Duration) []Charge {
	as := make([]Charge, n)
	for i := range as {
		as[i] = Charge{At: last.Add(-time.Duration(n-1-i) * gap), Result: ResultDeclined, Class: c.Class}
	}
	return as
}

func exact() Policy {
	p := DefaultPolicy()
	p.AnchorSpread = 0
	return p
}

func TestNextAttemptRetries(t *testing.T) {
	visaFunds := classify("insufficient_funds", declines.NetworkVisa)
	velocity := classify("card_velocity_exceeded", declines.NetworkVisa)
	invalidAmount := classify("invalid_amount", declines.NetworkVisa)
	technical := classify("processing_error", declines.NetworkVisa)
	technicalAmex := classify("processing_error", declines.NetworkAmex)
	generic := classify("generic_decline", declines.NetworkVisa)
	mac25 := declines.Classify(declines.Decline{Code: "insufficient_funds", NetworkAdviceCode: "25", Network: declines.NetworkMastercard})
	mac02 := declines.Classify(declines.Decline{Code: "do_not_honor", NetworkAdviceCode: "02", Network: declines.NetworkMastercard})
	est := time.FixedZone("EST", -5*3600)

	tests := map[string]struct {
		policy func(*Policy)
		in     Input
		now    time.Time
		at     time.Time // exact expected time, or zero to check [lo, hi)
		lo, hi time.Time
		reason Reason
		says   string // a fragment the explanation must contain
	}{
		"insufficient funds waits for the 1st": {
			in: Input{Classification: visaFunds, Charges: history(visaFunds, 1, now, 0)},
			at: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
			says: "Retrying on 1 Dec at 09:00 UTC, the next payday (the 1st or 15th of the month), because the card issuer declined: insufficient funds.",
		},
		"insufficient funds on a payday waits for the next one, not hours": {
			policy: func(p *Policy) { p.Window = 30 * day },
			in:     Input{Classification: visaFunds, Charges: history(visaFunds, 1, time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), 0)},
			now:    time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC),
			at:     time.Date(2026, 12, 15, 9, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
		},
		"insufficient funds at the billing anchor": {
			policy: func(p *Policy) { p.UseBillingAnchor = true },
			in:     Input{Classification: visaFunds, Charges: history(visaFunds, 1, now, 0), AnchorDay: 7},
			at:     time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
			says: "the next billing-cycle boundary (the 7th)",
		},
		"anchor ignored unless configured": {
			in: Input{Classification: visaFunds, Charges: history(visaFunds, 1, now, 0), AnchorDay: 7},
			at: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
		},
		"payday 31 in February is its last day": {
			policy: func(p *Policy) { p.Paydays = []int{31}; p.Window = 30 * day },
			in:     Input{Classification: visaFunds, Charges: history(visaFunds, 1, time.Date(2027, 2, 10, 8, 0, 0, 0, time.UTC), 0)},
			now:    time.Date(2027, 2, 10, 8, 0, 0, 0, time.UTC),
			at:     time.Date(2027, 2, 28, 9, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
		},
		"payday in the configured time zone": {
			policy: func(p *Policy) { p.Location = est },
			in:     Input{Classification: visaFunds, Charges: history(visaFunds, 1, now, 0)},
			at:     time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), reason: ReasonFundedMoment,
			says: "1 Dec at 09:00 EST",
		},
		"funded moment spread over the hour": {
			policy: func(p *Policy) { p.AnchorSpread = time.Hour },
			in:     Input{Classification: visaFunds, Charges: history(visaFunds, 1, now, 0)},
			at:     ceilSecond(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Add(firstDraw(time.Hour))), reason: ReasonFundedMoment,
		},
		"daily limit: next day": {
			in:  Input{Classification: velocity, Charges: history(velocity, 1, time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC), 0)},
			now: time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC),
			at:  time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), reason: ReasonNextDay,
			says: "the next day, after the daily limit resets",
		},
		"cycle limit: next anchor day": {
			in: Input{Classification: invalidAmount, Charges: history(invalidAmount, 1, now, 0), AnchorDay: 5},
			at: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), reason: ReasonNextCycle,
		},
		"technical: first retry within a minute": {
			in: Input{Classification: technical, Charges: history(technical, 1, now, 0)},
			at: ceilSecond(now.Add(firstDraw(time.Minute))), reason: ReasonBackoff,
		},
		"technical: third in a row within four minutes": {
			in: Input{Classification: technical, Charges: history(technical, 3, now, time.Minute)},
			at: ceilSecond(now.Add(firstDraw(4 * time.Minute))), reason: ReasonBackoff,
		},
		"technical: backoff stops growing at the cap": {
			policy: func(p *Policy) { p.MaxAttempts = 50 },
			in:     Input{Classification: technicalAmex, Charges: history(technicalAmex, 40, now, time.Minute)},
			at:     ceilSecond(now.Add(firstDraw(time.Hour))), reason: ReasonBackoff,
		},
		"technical: a generic decline in between restarts the backoff": {
			in: Input{Classification: technical, Charges: append(history(technical, 3, now.Add(-time.Hour), time.Minute),
				Charge{At: now.Add(-30 * time.Minute), Result: ResultDeclined, Class: declines.ClassGeneric},
				Charge{At: now, Result: ResultDeclined, Class: declines.ClassTechnical})},
			at: ceilSecond(now.Add(firstDraw(time.Minute))), reason: ReasonBackoff,
		},
		"generic: first retry a day later plus up to 6 hours": {
			in: Input{Classification: generic, Charges: history(generic, 1, now, 0)},
			lo: now.Add(day), hi: now.Add(day + 6*time.Hour), reason: ReasonSpaced,
			says: "spaced retry 1 of 4, about 1 day after the last attempt",
		},
		"generic: third retry two days later": {
			in: Input{Classification: generic, Charges: history(generic, 3, now, 2*day)},
			lo: now.Add(2 * day), hi: now.Add(2*day + 6*time.Hour), reason: ReasonSpaced,
			says: "spaced retry 3 of 4",
		},
		"MAC 25: exactly 24 hours, no jitter": {
			in: Input{Classification: mac25, Charges: history(mac25, 1, now, 0)},
			at: now.Add(24 * time.Hour), reason: ReasonAdvisedDelay,
			says: "exactly the delay the card network advised (1 day), because Mastercard advised: retry after 24 hours.",
		},
		"MAC 02: 72 hours": {
			in: Input{Classification: mac02, Charges: history(mac02, 1, now, 0)},
			at: now.Add(72 * time.Hour), reason: ReasonAdvisedDelay,
		},
		"Retry-After honoured exactly": {
			in: Input{Classification: technical, Charges: []Charge{{At: now, Result: ResultFailed, Class: technical.Class, RetryAfterSeconds: 120}}},
			at: now.Add(2 * time.Minute), reason: ReasonRetryAfter,
			says: "as the provider's Retry-After of 2 minutes asked",
		},
		"Retry-After already past: now": {
			in:  Input{Classification: technical, Charges: []Charge{{At: now, Result: ResultFailed, Class: technical.Class, RetryAfterSeconds: 30}}},
			now: now.Add(time.Minute),
			at:  now.Add(time.Minute), reason: ReasonRetryAfter,
		},
		"planned in the past moves to now": {
			in:  Input{Classification: mac25, Charges: history(mac25, 1, now, 0)},
			now: now.Add(30 * time.Hour),
			at:  now.Add(30 * time.Hour), reason: ReasonAdvisedDelay,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := exact()
			if tc.policy != nil {
				tc.policy(&p)
			}
			at := tc.now
			if at.IsZero() {
				at = now
			}
			plan, err := NextAttempt(p, tc.in, at, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Retry || plan.Reason != tc.reason || plan.Attempt != len(tc.in.Charges)+1 || plan.Limit != "" {
				t.Fatalf("plan %+v; want a retry for %s, attempt %d", plan, tc.reason, len(tc.in.Charges)+1)
			}
			if !tc.at.IsZero() && !plan.At.Equal(tc.at) {
				t.Errorf("at %s, want %s", plan.At, tc.at)
			}
			if tc.at.IsZero() && (plan.At.Before(tc.lo) || !plan.At.Before(tc.hi)) {
				t.Errorf("at %s, want in [%s, %s)", plan.At, tc.lo, tc.hi)
			}
			if plan.At.Location() != time.UTC || plan.At.Nanosecond() != 0 {
				t.Errorf("at %v is not UTC whole seconds", plan.At)
			}
			if !strings.Contains(plan.Explanation, tc.says) {
				t.Errorf("explanation %q lacks %q", plan.Explanation, tc.says)
			}
		})
	}
}

func TestNextAttemptStops(t *testing.T) {
	stops := map[string]struct {
		code   string
		reason Reason
		says   string
	}{
		"lost card":             {"lost_card", ReasonNeedsCustomer, "Not retrying because the card issuer declined: the card was reported lost; the customer needs to add a new payment method."},
		"stolen card":           {"stolen_card", ReasonNeedsCustomer, "reported stolen"},
		"pickup card":           {"pickup_card", ReasonHardDecline, "this card cannot be charged again"},
		"fraudulent":            {"fraudulent", ReasonNeedsReview, "an operator should review it"},
		"revoked":               {"revocation_of_authorization", ReasonCancelled, "treat it as the customer cancelling"},
		"expired":               {"expired_card", ReasonNeedsCustomer, "account updater"},
		"incorrect cvc":         {"incorrect_cvc", ReasonNeedsCustomer, "correct the card details"},
		"authentication":        {"authentication_required", ReasonNeedsCustomer, "payment link"},
		"duplicate transaction": {"duplicate_transaction", ReasonNeedsReview, "review"},
		"test card in live":     {"testmode_decline", ReasonNeedsReview, "integration"},
	}
	for name, tc := range stops {
		t.Run(name, func(t *testing.T) {
			c := classify(tc.code, declines.NetworkVisa)
			plan, err := NextAttempt(DefaultPolicy(), Input{Classification: c, Charges: history(c, 1, now, 0)}, now, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if plan.Retry || !plan.At.IsZero() || plan.Reason != tc.reason || plan.Attempt != 1 {
				t.Fatalf("plan %+v; want a stop for %s", plan, tc.reason)
			}
			if !strings.Contains(plan.Explanation, tc.says) {
				t.Errorf("explanation %q lacks %q", plan.Explanation, tc.says)
			}
		})
	}
}

func TestNextAttemptCaps(t *testing.T) {
	technicalVisa := classify("processing_error", declines.NetworkVisa)
	technicalMC := classify("processing_error", declines.NetworkMastercard)
	technicalAmex := classify("processing_error", declines.NetworkAmex)
	generic := classify("generic_decline", declines.NetworkVisa)
	big := func(p *Policy) { p.MaxAttempts = 100 }

	// 19 reattempts on the card for other payments, the oldest 29 days ago.
	var visaCard []Charge
	visaCard = append(visaCard, Charge{At: now.Add(-29 * day), Result: ResultDeclined, Reattempt: true})
	for i := range 18 {
		visaCard = append(visaCard, Charge{At: now.Add(-time.Duration(i+1) * time.Hour), Result: ResultDeclined, Reattempt: true})
	}
	// Other payments' original charges are not reattempts and must not count.
	visaCard = append(visaCard, Charge{At: now.Add(-2 * time.Hour), Result: ResultDeclined})

	tests := map[string]struct {
		policy func(*Policy)
		in     Input
		retry  bool
		at     time.Time
		limit  Limit
		reason Reason
	}{
		"Visa: the 21st reattempt in 30 days waits for the oldest to age out": {
			in:    Input{Classification: technicalVisa, Charges: history(technicalVisa, 2, now, time.Minute), CardCharges: visaCard},
			retry: true, at: now.Add(day), limit: LimitVisa30d, reason: ReasonBackoff,
		},
		"Visa: the 20th reattempt is allowed": {
			in:    Input{Classification: technicalVisa, Charges: history(technicalVisa, 1, now, 0), CardCharges: visaCard},
			retry: true, at: ceilSecond(now.Add(firstDraw(time.Minute))), reason: ReasonBackoff,
		},
		"Mastercard: an 11th decline in 24 hours waits": {
			policy: big,
			in:     Input{Classification: technicalMC, Charges: history(technicalMC, 10, now, time.Hour)},
			retry:  true, at: now.Add(-9 * time.Hour).Add(24 * time.Hour), limit: LimitMastercard24h, reason: ReasonBackoff,
		},
		"Mastercard: failed attempts are not declines": {
			policy: big,
			in: Input{Classification: technicalMC, Charges: append(history(technicalMC, 9, now.Add(-time.Minute), time.Minute),
				Charge{At: now, Result: ResultFailed, Class: technicalMC.Class})},
			retry: true, at: ceilSecond(now.Add(firstDraw(time.Hour))), reason: ReasonBackoff,
		},
		"Mastercard: 35 declines in 30 days exhausts the window": {
			policy: big,
			in: Input{Classification: technicalMC, Charges: history(technicalMC, 5, now, time.Minute),
				CardCharges: history(technicalMC, 30, now.Add(-time.Hour), 2*time.Hour)},
			limit: LimitMastercard30d, reason: ReasonExhausted,
		},
		"no network caps for Amex, only ours": {
			policy: big,
			in:     Input{Classification: technicalAmex, Charges: history(technicalAmex, 30, now, time.Minute)},
			retry:  true, at: ceilSecond(now.Add(firstDraw(time.Hour))), reason: ReasonBackoff,
		},
		"our maximum attempts": {
			in:    Input{Classification: technicalAmex, Charges: history(technicalAmex, 9, now, time.Minute)},
			limit: LimitMaxAttempts, reason: ReasonExhausted,
		},
		"the recovery window": {
			in:    Input{Classification: generic, Charges: history(generic, 2, now, 13*day)},
			limit: LimitWindow, reason: ReasonExhausted,
		},
		"the generic schedule": {
			policy: func(p *Policy) { p.Window = 60 * day },
			in:     Input{Classification: generic, Charges: history(generic, 5, now, 2*day)},
			limit:  LimitSchedule, reason: ReasonExhausted,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := exact()
			if tc.policy != nil {
				tc.policy(&p)
			}
			plan, err := NextAttempt(p, tc.in, now, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if plan.Retry != tc.retry || plan.Limit != tc.limit || plan.Reason != tc.reason || !plan.At.Equal(tc.at) {
				t.Fatalf("plan %+v\nwant retry=%v at=%s limit=%s reason=%s", plan, tc.retry, tc.at, tc.limit, tc.reason)
			}
			if plan.Reason == ReasonExhausted && !strings.HasSuffix(plan.Explanation, "; ask the customer to pay or update their payment method.") {
				t.Errorf("exhausted explanation %q", plan.Explanation)
			}
			if plan.Limit != "" && plan.Limit != LimitMaxAttempts && plan.Limit != LimitSchedule && plan.Limit != LimitWindow &&
				!strings.Contains(plan.Explanation, capText[plan.Limit]) {
				t.Errorf("explanation %q does not name the cap", plan.Explanation)
			}
		})
	}
}

func TestNextAttemptErrors(t *testing.T) {
	c := classify("generic_decline", "")
	if _, err := NextAttempt(DefaultPolicy(), Input{Classification: c}, now, seeded()); !errors.Is(err, ErrNoAttempts) {
		t.Errorf("empty history: %v", err)
	}
	bad := map[string]func(*Policy){
		"negative attempts": func(p *Policy) { p.MaxAttempts = -1 },
		"hour 24":           func(p *Policy) { p.Hour = 24 },
		"payday 32":         func(p *Policy) { p.Paydays = []int{32} },
		"cap below base":    func(p *Policy) { p.TechnicalCap = time.Second },
		"zero gap":          func(p *Policy) { p.GenericGaps = []time.Duration{0} },
		"short window":      func(p *Policy) { p.Window = time.Minute },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			p := DefaultPolicy()
			mutate(&p)
			if _, err := NewPlanner(Planner{Policy: p, Now: func() time.Time { return now }, Rand: seeded()}); !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("NewPlanner: %v", err)
			}
			if _, err := NextAttempt(p, Input{Classification: c, Charges: history(c, 1, now, 0)}, now, seeded()); !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("NextAttempt: %v", err)
			}
		})
	}
}

func TestNewPlannerNeedsRand(t *testing.T) {
	if _, err := NewPlanner(Planner{Policy: DefaultPolicy(), Now: time.Now}); !errors.Is(err, ErrNoRand) {
		t.Errorf("no rand: %v", err)
	}
	if _, err := NewPlanner(Planner{Policy: DefaultPolicy(), Rand: seeded()}); err != nil {
		t.Errorf("no clock (time.Now by default): %v", err)
	}
}

func TestPlannerUsesItsClock(t *testing.T) {
	c := declines.Classify(declines.Decline{NetworkAdviceCode: "24", Network: declines.NetworkMastercard})
	later := now.Add(5 * time.Hour)
	pl, err := NewPlanner(Planner{Now: func() time.Time { return later }, Rand: seeded()})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pl.Plan(Input{Classification: c, Charges: history(c, 1, now, 0)})
	if err != nil || !plan.At.Equal(later) {
		t.Fatalf("plan %+v, %v; want a retry at the planner's now %s", plan, err, later)
	}
}

func TestPlanJSON(t *testing.T) {
	c := classify("insufficient_funds", declines.NetworkVisa)
	in := Input{Classification: c, Charges: history(c, 1, now, 0)}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back Input // the input survives a trip through the state machine
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	plan, err := NextAttempt(exact(), back, now, seeded())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plan)
	if !strings.Contains(string(b), `"at":"2026-12-01T09:00:00Z"`) || !strings.Contains(string(b), `"attempt":2`) {
		t.Errorf("plan JSON %s", b)
	}
	stop, _ := NextAttempt(exact(), Input{Classification: classify("lost_card", ""), Charges: in.Charges}, now, seeded())
	b, _ = json.Marshal(stop)
	if strings.Contains(string(b), `"at"`) || !strings.Contains(string(b), `"retry":false`) {
		t.Errorf("stop JSON %s", b)
	}
}

func TestPlanLogValue(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	c := declines.Classify(declines.Decline{NetworkAdviceCode: "24", Network: declines.NetworkMastercard})
	plan, err := NextAttempt(DefaultPolicy(), Input{Classification: c, Charges: history(c, 1, now, 0)}, now, seeded())
	if err != nil {
		t.Fatal(err)
	}
	log.Info("retry scheduled", "plan", plan)
	for _, want := range []string{`"retry":true`, `"attempt":2`, `"reason":"advised_delay"`, `"at":"2026-11-29T09:00:00Z"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log line %s lacks %s", buf.String(), want)
		}
	}
}
