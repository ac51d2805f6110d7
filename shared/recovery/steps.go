package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// The steps of statemachines/payment-recovery.asl.json: every Task passes {"step": name,
// "state": <the execution state>} to Steps.Handle.
const (
	StepPlan       = "plan"        // classify the payment's decline and plan the next attempt
	StepCharge     = "charge"      // attempt the planned charge, record it, plan again after a decline
	StepDeadLetter = "dead_letter" // open the dead-letter record of a recovery that stopped
	StepPark       = "park"        // end the execution at a wait: commit the parked state and its timer (resume.go)
	StepSteer      = "steer"       // apply a steering signal: charge soon, or stop
)

// ResultStopped is a state's result when an operator stopped the recovery.
const ResultStopped Result = "stopped"

// ResultSettled is a state's result when the payment no longer needs recovering (it
// succeeded, was refunded or cancelled outside recovery); it is never a charge's result.
const ResultSettled Result = "settled"

// State is the execution state of the recovery state machine. The starter sets PaymentID,
// Invoice and Round; the plan and charge steps return it whole with the history, the plan
// and the result; a Catch adds Error. It stays small: ids, at most Policy.MaxAttempts+1
// attempts and one plan.
type State struct {
	PaymentID string   `json:"payment_id"`
	Invoice   string   `json:"invoice"`
	Round     int      `json:"round"`
	Charges   []Charge `json:"attempts"` // never omitted: the Task ResultSelectors read it
	Plan      *Plan    `json:"plan,omitempty"`
	Result    Result   `json:"outcome,omitempty"`
	Error     *Failure `json:"error,omitempty"`
	// Seq orders the recovery's stored states across steps (the Task ResultSelectors carry
	// it): each step writes above it and returns it advanced.
	Seq int64 `json:"seq"`
	// PaymentMethod, when set, is the payment method a steering signal asked the next charge
	// to use (a customer's new card); empty: the payment's own.
	PaymentMethod string `json:"payment_method"` // never omitted: the Task ResultSelectors read it
	// ChargeNow, in the input of an execution an operator's dead-letter retry started, links
	// it to the record and makes the first plan a charge at once (ChargeNowPlan); the plan
	// carries it on.
	ChargeNow *RetryLink `json:"charge_now,omitempty"`
}

// Failure is what a Catch with ResultPath "$.error" adds: the error name and its cause.
type Failure struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// KeySubject is the business key of this recovery's provider idempotency keys: the invoice, or
// the payment id without one; a later round (an operator re-running recovery) adds "#round-N"
// so that its attempt numbers do not replay the first round's outcomes.
func (s State) KeySubject() string {
	k := s.Invoice
	if k == "" {
		k = s.PaymentID
	}
	if s.Round > 1 {
		k += "#round-" + strconv.Itoa(s.Round)
	}
	return k
}

// DeadLetter is a recovery that needs a person: what happened in plain language, what to do,
// and every attempt. Key is deterministic (one per payment and round), so the sink opens one
// record however often the step runs.
type DeadLetter struct {
	Key             string          `json:"key"`
	Source          string          `json:"source"` // always "recovery"
	PaymentID       string          `json:"payment_id"`
	Invoice         string          `json:"invoice,omitempty"`
	Reason          string          `json:"reason"` // a plan's Reason, or "step_failed"
	Explanation     string          `json:"explanation"`
	SuggestedAction string          `json:"suggested_action"`
	Charges         []Charge        `json:"attempts"`
	Payload         json.RawMessage `json:"payload"` // the execution state as the step received it
	// RetryOf is set when the stopped execution was an operator's retry of a dead-letter
	// record: the sink reopens that record with these attempts instead of opening a new one.
	RetryOf *RetryLink `json:"retry_of,omitempty"`
}

// DeadLetterSink opens dead-letter records. Open must be idempotent on DeadLetter.Key: the
// step that calls it runs at least once.
type DeadLetterSink interface {
	Open(ctx context.Context, d DeadLetter) error
}

// Step Functions error names of the steps' errors; Retry and Catch match them.
const (
	ErrNameTransient = "Recovery.Transient" // safe to repeat: the Task Retry does
	ErrNameInvalid   = "Recovery.Invalid"   // bad input: never retried
	ErrNameRejected  = "Recovery.Rejected"  // the provider refused the request and would again
)

// TransientError is a failure a repeat may cure: the provider's unknown outcome, throttling
// or outage, or a store error. A repeated charge reuses its attempt key, so it is safe.
type TransientError struct {
	Op  string
	Err error
}

func (e *TransientError) Error() string { return "recovery: " + e.Op + ": " + e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// ErrorName is the name Retry matches.
func (e *TransientError) ErrorName() string { return ErrNameTransient }

// InvalidError is input the steps cannot work with: malformed JSON, an unknown step or
// payment, a charge without a retry plan.
type InvalidError struct {
	Err error
}

func (e *InvalidError) Error() string { return "recovery: invalid input: " + e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// ErrorName is the name Catch sees.
func (e *InvalidError) ErrorName() string { return ErrNameInvalid }

// RejectedError is a provider refusal that will not change on repeat: a permanent error,
// rejected credentials, an idempotency key reused with other parameters.
type RejectedError struct {
	Op  string
	Err error
}

func (e *RejectedError) Error() string { return "recovery: " + e.Op + ": rejected: " + e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// ErrorName is the name Catch sees.
func (e *RejectedError) ErrorName() string { return ErrNameRejected }

func invalid(format string, args ...any) error {
	return &InvalidError{Err: fmt.Errorf(format, args...)}
}

// ErrStepsConfig is returned by NewSteps when a required dependency is missing.
var ErrStepsConfig = errors.New("recovery: NewSteps needs a provider, a store, a dead-letter sink and a random source")

// Steps runs the recovery state machine's tasks. It is safe for concurrent use. Build it with
// NewSteps, which checks the policy and builds the planner once. Every field but Policy, Now
// and Log is required.
type Steps struct {
	Provider    provider.Provider
	Store       store.Store
	DeadLetters DeadLetterSink
	Policy      Policy // zero fields take DefaultPolicy's
	// Now defaults to time.Now and Log to slog.Default().
	Now func() time.Time
	// TimeFactor is how many times faster than Now the workflow's time runs (the local
	// stack's -time-factor; 0 or 1: the same, as on AWS): a wait of d on the workflow's time
	// is a timer due d/TimeFactor from Now, the clock the outbox relay fires timers by.
	TimeFactor float64
	Rand       *rand.Rand // jitter; Steps guards it with a mutex
	Log        *slog.Logger

	planner *Planner
}

// NewSteps validates s and its policy and returns it ready to run.
func NewSteps(s Steps) (*Steps, error) {
	if s.Provider == nil || s.Store == nil || s.DeadLetters == nil || s.Rand == nil {
		return nil, ErrStepsConfig
	}
	out := &s
	pl, err := NewPlanner(Planner{Policy: s.Policy, Now: out.now, Rand: s.Rand})
	if err != nil {
		return nil, err
	}
	out.planner = pl
	return out, nil
}

func (s *Steps) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Steps) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// StepInput is what every Task of the state machine passes to Steps.Handle.
type StepInput struct {
	Step  string `json:"step"`
	State State  `json:"state"`
	// Now is the workflow's time when the step's state was entered ($$.State.EnteredTime).
	// The steps take the later of it and their own clock: on AWS the two agree (the clock is
	// the later, past Task retries); on the local runner with a time factor, the workflow's
	// time is each recovery's own, running ahead of the stack's.
	Now time.Time `json:"now,omitzero"`
}

// DeadLetterResult is the dead-letter step's answer.
type DeadLetterResult struct {
	ID string `json:"id"` // the dead-letter record's key
}

// Handle runs the step named by the input's "step" field on its "state" and returns the new
// state (the dead-letter step returns a DeadLetterResult). It is the Lambda handler of
// functions/recovery-steps (through LambdaHandler) and the local runner's TaskFunc. Errors
// are *TransientError, *InvalidError or *RejectedError, named for Retry and Catch.
func (s *Steps) Handle(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	var req StepInput
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, invalid("decode: %w", err)
	}
	st := req.State
	if st.PaymentID == "" {
		return nil, invalid("state has no payment_id")
	}
	if st.Round < 1 {
		return nil, invalid("state round %d < 1", st.Round)
	}
	now := s.now()
	if req.Now.After(now) {
		now = req.Now
	}
	var out any
	var err error
	switch req.Step {
	case StepPlan:
		out, err = s.plan(ctx, st, now)
	case StepCharge:
		out, err = s.charge(ctx, st, now)
	case StepDeadLetter:
		out, err = s.deadLetter(ctx, st)
	case StepPark:
		out, err = s.park(ctx, st, now)
	case StepSteer:
		out, err = s.steer(ctx, st, now)
	default:
		return nil, invalid("unknown step %q", req.Step)
	}
	if err != nil {
		return nil, err
	}
	if st, ok := out.(State); ok {
		st.Seq += 2 // the next step writes above this one's writes
		out = st
	}
	return json.Marshal(out)
}

// plan classifies the payment's decline and plans the next attempt. The first plan of a
// recovery starts the history with the declined charge that started it.
func (s *Steps) plan(ctx context.Context, st State, now time.Time) (State, error) {
	p, err := s.payment(ctx, st.PaymentID)
	if err != nil {
		return st, err
	}
	if settled(p.Status) {
		st = s.settle(ctx, st, p)
		if err := s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phaseEnded)); err != nil {
			return st, err
		}
		return st, s.closeRetry(ctx, st, "The payment was already "+p.Status+"; nothing was charged.")
	}
	if p.Status != provider.StatusDeclined {
		// Still pending or processing: the outcome will settle; the Task Retry asks again.
		return st, &TransientError{Op: StepPlan, Err: fmt.Errorf("payment %s is %s, not declined yet", p.ID, p.Status)}
	}
	c := classifyDecline(p.Decline)
	var original *cardledger.Entry
	if len(st.Charges) == 0 {
		at := p.UpdatedAt
		if at.IsZero() {
			at = p.CreatedAt
		}
		if at.IsZero() {
			at = now
		}
		st.Charges = []Charge{{At: at.UTC(), Result: ResultDeclined, Class: c.Class, Card: fingerprint(p.Card)}}
		if st.Round == 1 {
			// The original charge's decline enters the card's ledger here: every declined
			// payment starts a recovery (an outbox message committed with the decline), so the
			// API's own commit never contends on the card's item.
			original = &cardledger.Entry{Key: p.ProviderKey, At: at.UTC(), Result: cardledger.ResultDeclined,
				PaymentID: p.ID}
		}
	}
	card, err := s.card(ctx, p)
	if err != nil {
		return st, err
	}
	if st.ChargeNow != nil {
		plan := ChargeNowPlan(Input{Classification: c, Charges: st.Charges, CardCharges: cardCharges(card, st), Card: card.Fingerprint}, now)
		plan.ChargeNow = st.ChargeNow
		st.Plan, st.Result = &plan, ResultDeclined
		s.log().InfoContext(ctx, "recovery charge-now planned", "payment_id", st.PaymentID, "plan", plan)
		return st, s.commit(ctx, p, original, s.recoveryRecord(st, p, now, phasePlanned))
	}
	st, err = s.planNext(ctx, st, c, now, card)
	if err != nil {
		return st, err
	}
	return st, s.commit(ctx, p, original, s.recoveryRecord(st, p, now, phasePlanned))
}

// card reads the ledger of the payment's card; a payment whose card is not known yet has an
// empty one (only this recovery's own history then counts).
func (s *Steps) card(ctx context.Context, p payments.Payment) (cardledger.Card, error) {
	if p.Card == nil {
		return cardledger.Card{}, nil
	}
	c, err := cardledger.Get(ctx, s.Store, payments.Table, p.Card.Fingerprint)
	if err != nil {
		return c, &TransientError{Op: "read card ledger", Err: err}
	}
	return c, nil
}

// cardCharges are the card's charges that this recovery's history does not hold already:
// those of other payments, and of this payment's other rounds.
func cardCharges(c cardledger.Card, st State) []Charge {
	var out []Charge
	for _, e := range c.Entries {
		if e.PaymentID == st.PaymentID && (e.Recovery == st.KeySubject() || (e.Recovery == "" && st.Round == 1)) {
			continue
		}
		o := ResultDeclined // a pending attempt counts as a decline
		switch e.Result {
		case cardledger.ResultSucceeded:
			o = ResultSucceeded
		case cardledger.ResultFailed:
			o = ResultFailed
		}
		out = append(out, Charge{At: e.At, Result: o, Reattempt: e.Reattempt})
	}
	return out
}

func (s *Steps) planNext(ctx context.Context, st State, c declines.Classification, now time.Time, card cardledger.Card) (State, error) {
	plan, err := s.planner.PlanAt(Input{Classification: c, Charges: st.Charges, CardCharges: cardCharges(card, st), Card: card.Fingerprint}, now)
	if err != nil {
		return st, invalid("plan: %w", err)
	}
	st.Plan, st.Result = &plan, ResultDeclined
	if plan.Retry {
		s.log().InfoContext(ctx, "recovery retry scheduled", "payment_id", st.PaymentID, "invoice", st.Invoice, "plan", plan)
	} else {
		s.log().InfoContext(ctx, "recovery stopped", "payment_id", st.PaymentID, "invoice", st.Invoice, "plan", plan)
	}
	return st, nil
}

func (s *Steps) settle(ctx context.Context, st State, p payments.Payment) State {
	st.Result = ResultSettled
	if st.Charges == nil {
		st.Charges = []Charge{}
	}
	plan := Plan{Attempt: len(st.Charges)}
	if st.Plan != nil {
		plan = *st.Plan
	}
	plan.Retry, plan.At = false, time.Time{}
	plan.Explanation = "Not retrying because the payment is already " + p.Status + "."
	st.Plan = &plan
	s.log().InfoContext(ctx, "recovery stopped: payment already settled", "payment_id", st.PaymentID, "status", p.Status)
	return st
}

// charge attempts the planned charge: it re-confirms the payment's PaymentIntent off-session
// with its payment method under the provider key AttemptKey(KeySubject, attempt), records
// the outcome on the payment (with a newer version) and in the history, and plans again after
// a decline. A repeat of the step (a Lambda retry, a resumed execution) sends the same key,
// so the provider returns the first outcome instead of charging again.
func (s *Steps) charge(ctx context.Context, st State, now time.Time) (State, error) {
	if st.Plan == nil || !st.Plan.Retry || st.Plan.Attempt < 2 || len(st.Charges) == 0 {
		return st, invalid("charge needs a retry plan for attempt 2 or later and a history")
	}
	p, err := s.payment(ctx, st.PaymentID)
	if err != nil {
		return st, err
	}
	if settled(p.Status) {
		st = s.settle(ctx, st, p) // paid another way meanwhile: never charge twice
		if err := s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phaseEnded)); err != nil {
			return st, err
		}
		return st, s.closeRetry(ctx, st, "The payment was already "+p.Status+"; nothing was charged.")
	}
	if p.ProviderPaymentID == "" {
		// Declined, yet without the provider's id: a write of the API's pending outcome and
		// the provider's event crossed; the resolver records the id. The Task Retry asks again.
		return st, &TransientError{Op: StepCharge, Err: fmt.Errorf("payment %s has no provider payment to confirm yet", p.ID)}
	}
	// A steering signal that arrived after the wait ended still counts: stop, or the
	// customer's new payment method.
	pending, err := GetSteer(ctx, s.Store, st.PaymentID)
	if err != nil {
		return st, &TransientError{Op: "read steering", Err: err}
	}
	var consume []store.Write
	if pending != nil {
		if pending.Action == ActionStop {
			return s.stop(ctx, st, p, *pending, now)
		}
		if pending.Action == ActionReplan {
			// The plan was for a decline the payment no longer has: plan again, no charge.
			return s.replan(ctx, st, p, *pending, now)
		}
		if pending.PaymentMethod != "" {
			st.PaymentMethod = pending.PaymentMethod
		}
		consume = append(consume, pending.consumed())
	}
	if st.PaymentMethod != "" && st.PaymentMethod != p.PaymentMethod {
		// A steered charge with another payment method is checked, reserved and recorded on
		// the card it charges, never on the declined one: the caps are per card.
		card, err := s.chargedCard(ctx, p, st.PaymentMethod)
		if err != nil {
			return st, err
		}
		p.PaymentMethod, p.Card = st.PaymentMethod, card
	}
	if p.PaymentMethod == "" {
		// A payment first heard of through its payment_failed webhook (the API's commit lost to
		// a timeout or a crash) has no payment method: the provider detached it at the decline
		// and keeps it on last_payment_error, where the adapter reads it. Confirming with none
		// is rejected, so read it back first.
		cur, err := s.Provider.Get(ctx, p.ProviderPaymentID)
		if err != nil {
			return st, providerError(err)
		}
		p.PaymentMethod = cur.PaymentMethod
	}
	key := provider.AttemptKey(st.KeySubject(), st.Plan.Attempt)
	if p.Card != nil {
		// Check the card's caps and reserve the attempt in one transaction with the recovery's
		// "charging" state; a repeat of this step finds its reservation and goes on.
		charging := s.recoveryRecord(st, p, now, phaseCharging)
		var blocked cardledger.Allowance
		err := cardledger.Update(ctx, s.Store, payments.Table, p.Card.Fingerprint, p.Card.Brand, func(c *cardledger.Card) ([]store.Write, error) {
			if !c.Has(key) {
				if a := c.Allowance(now); a.Capped && a.Left == 0 {
					blocked = a
					return nil, cardledger.ErrCapped
				}
				c.Record(cardledger.Entry{Key: key, At: now, Result: cardledger.ResultPending, Reattempt: true,
					PaymentID: p.ID, Recovery: st.KeySubject()}, now)
			}
			return charging.Writes()
		})
		var ce *store.ConditionError
		switch {
		case errors.Is(err, cardledger.ErrCapped):
			// Other payments used the card meanwhile: plan again, from the whole ledger.
			s.log().InfoContext(ctx, "recovery charge deferred by a card cap", "payment_id", st.PaymentID,
				"limit", blocked.Limit, "next_allowed_at", blocked.NextAt)
			card, err := s.card(ctx, p)
			if err != nil {
				return st, err
			}
			st, err = s.planNext(ctx, st, onCard(classifyDecline(p.Decline), p.Card), now, card)
			if err != nil {
				return st, err
			}
			return st, s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phaseDeferred))
		case errors.As(err, &ce):
			// A newer recovery state is stored (a later step got there): reserve without it.
			err = cardledger.Update(ctx, s.Store, payments.Table, p.Card.Fingerprint, p.Card.Brand, func(c *cardledger.Card) ([]store.Write, error) {
				c.Record(cardledger.Entry{Key: key, At: now, Result: cardledger.ResultPending, Reattempt: true,
					PaymentID: p.ID, Recovery: st.KeySubject()}, now)
				return nil, nil
			})
		}
		if err != nil {
			return st, &TransientError{Op: "reserve card attempt", Err: err}
		}
	}
	pp, err := s.Provider.Confirm(ctx, provider.ConfirmRequest{ID: p.ProviderPaymentID,
		PaymentMethod: p.PaymentMethod, OffSession: true, IdempotencyKey: key})
	var decline *provider.DeclineError
	if errors.As(err, &decline) {
		pp, err = decline.Payment, nil
	}
	if err != nil {
		return st, providerError(err)
	}
	now = now.UTC()
	// The outcome's version is on the clock every other writer of the payment shares (the
	// provider's events, the API, reconciliation), not on the execution's time, which the
	// local runner runs faster: a version from days ahead would make every later event of the
	// provider look older than this write, the next attempt's success with it.
	shared := s.now()
	entry := &cardledger.Entry{Key: key, At: now, Reattempt: true, PaymentID: p.ID, Recovery: st.KeySubject()}
	p.SetCard(pp.Card)
	if pp.LatestCharge != "" {
		p.LatestCharge = pp.LatestCharge // the charge a dispute of this attempt will name
	}
	switch pp.Status {
	case provider.StatusSucceeded:
		p.Transition(provider.StatusSucceeded, nil, nil, payments.VersionAt(shared, provider.StatusSucceeded), now)
		st.Charges = append(st.Charges, Charge{At: now, Result: ResultSucceeded, Reattempt: true, Card: fingerprint(p.Card)})
		st.Result = ResultSucceeded
		entry.Result = cardledger.ResultSucceeded
		if err := s.record(ctx, p, now, entry, s.recoveryRecord(st, p, now, phaseEnded), consume...); err != nil {
			return st, err
		}
		s.log().InfoContext(ctx, "recovery succeeded", "payment_id", st.PaymentID, "invoice", st.Invoice, "attempt", st.Plan.Attempt)
		return st, s.closeRetry(ctx, st, fmt.Sprintf("Payment %s succeeded on the charge an operator asked for (attempt %d, key %s).",
			st.PaymentID, st.Plan.Attempt, key))
	case provider.StatusDeclined:
		c := classifyDecline(pp.Decline)
		p.Transition(provider.StatusDeclined, pp.Decline, func(provider.Decline) string { return string(c.Class) },
			payments.VersionAt(shared, provider.StatusDeclined), now)
		st.Charges = append(st.Charges, Charge{At: now, Result: ResultDeclined, Class: c.Class, Reattempt: true, Card: fingerprint(p.Card)})
		entry.Result = cardledger.ResultDeclined
		if l := st.Plan.ChargeNow; l != nil {
			// The charge an operator asked for is one charge: its decline goes back to them.
			st.Plan = &Plan{Attempt: len(st.Charges), Reason: ReasonChargeNow, Class: c.Class, NeedsCustomer: c.NeedsCustomer,
				NeedsReview: c.NeedsReview, ChargeNow: l,
				Explanation: fmt.Sprintf("The charge an operator asked for was declined because %s.", clause(c.Explanation))}
			st.Result = ResultDeclined
			return st, s.record(ctx, p, now, entry, s.recoveryRecord(st, p, now, phasePlanned), consume...)
		}
		card, err := s.card(ctx, p)
		if err != nil {
			return st, err
		}
		card.Record(*entry, now) // plan with this attempt counted once, as the commit will store it
		st, err = s.planNext(ctx, st, c, now, card)
		if err != nil {
			return st, err
		}
		return st, s.record(ctx, p, now, entry, s.recoveryRecord(st, p, now, phasePlanned), consume...)
	case provider.StatusRefunded, provider.StatusCanceled:
		st = s.settle(ctx, st, payments.Payment{Status: string(pp.Status)})
		entry.Result = cardledger.ResultSucceeded // charged before, whatever came after
		if err := s.commit(ctx, p, entry, s.recoveryRecord(st, p, now, phaseEnded), consume...); err != nil {
			return st, err
		}
		return st, s.closeRetry(ctx, st, "The payment was already "+string(pp.Status)+" at the provider; nothing was charged.")
	}
	// Processing or pending: not an outcome yet. The repeat replays the same key, and the
	// provider's answer moves on once the attempt settles.
	return st, &TransientError{Op: StepCharge, Err: fmt.Errorf("payment %s is %s at the provider", p.ID, pp.Status)}
}

// chargedCard is the card behind pm, a payment method other than the payment's own (a
// steering signal's): the provider names it (nil when pm is no card, so no network cap
// applies to it). The declined card's ledger is no guide to another card's allowance.
func (s *Steps) chargedCard(ctx context.Context, p payments.Payment, pm string) (*payments.CardRef, error) {
	c, err := s.Provider.PaymentMethodCard(ctx, pm)
	if errors.Is(err, provider.ErrNotCard) {
		s.log().InfoContext(ctx, "recovery charge with a payment method that is no card: no card caps apply",
			"payment_id", p.ID, "payment_method", pm)
		return nil, nil
	}
	if err != nil {
		return nil, providerError(err)
	}
	var q payments.Payment
	q.SetCard(&c) // capped as a provider's answer is before it is stored
	if q.Card == nil {
		return nil, nil
	}
	return q.Card, nil
}

// fingerprint is the card's, "" when unknown.
func fingerprint(c *payments.CardRef) string {
	if c == nil {
		return ""
	}
	return c.Fingerprint
}

// onCard is a decline's classification with the caps of the card about to be charged: a
// steered charge on another card follows that card's network, not the declined one's.
func onCard(c declines.Classification, card *payments.CardRef) declines.Classification {
	if card != nil && card.Brand != "" {
		c.Network = declines.Network(card.Brand)
	}
	return c
}

// record stores the payment in its new state (versioned by the caller's Transition, updated at
// now), in one transaction with the attempt's outcome in the card's ledger and the recovery's
// new state. A newer version already stored (a webhook got there first) wins, and that is fine.
func (s *Steps) record(ctx context.Context, p payments.Payment, now time.Time, entry *cardledger.Entry, rec payments.Recovery, more ...store.Write) error {
	p.UpdatedAt = now
	w, err := p.Put()
	if err != nil {
		return invalid("encode payment %s: %w", p.ID, err)
	}
	// The change goes out on the event feed with it, due on the service's clock, not the
	// execution's (which may run faster): the relay delivers by the clock it shares with every
	// other writer.
	cw, err := payments.ChangeMessage(p, s.now())
	if err != nil {
		return invalid("encode change of %s: %w", p.ID, err)
	}
	groups := [][]store.Write{{w, cw}}
	for _, w := range append(payments.AliasWrites(p), more...) {
		groups = append(groups, []store.Write{w})
	}
	return s.commitGroups(ctx, p, entry, rec, groups...)
}

// The phases of a recovery's stored state within one attempt, in the order they are written.
// Within one step the phases are written in this order.
const (
	phaseParked int64 = iota + 1 // the park step's own write (a sequence of its own)
	phaseCharging
	phaseDeferred // planned again because a card cap forbade the planned charge
	phasePlanned
	phaseEnded
	phaseDeadLettered
)

// recoverySeq orders a recovery's stored states: by round, then by the execution's own
// sequence (State.Seq, advanced by every step: the park step writes at Seq+1, the others from
// Seq+2 on), then by phase within a step.
func recoverySeq(st State, phase int64, _ time.Time) int64 {
	return int64(st.Round)<<40 | (st.Seq+2)<<4 | phase
}

// recoveryRecord is the recovery's stored state after a step.
func (s *Steps) recoveryRecord(st State, p payments.Payment, now time.Time, phase int64) payments.Recovery {
	r := payments.Recovery{PaymentID: st.PaymentID, Round: st.Round, Attempts: len(st.Charges), Customer: p.Customer, Invoice: p.Invoice,
		Amount: p.Amount, Currency: p.Currency, UpdatedAt: now.UTC(),
		Seq: recoverySeq(st, phase, now)}
	if p.Card != nil {
		r.CardBrand = p.Card.Brand
	} else if p.Decline != nil {
		r.CardBrand = p.Decline.Network
	}
	if st.Plan != nil {
		r.Reason, r.Limit, r.Explanation = string(st.Plan.Reason), string(st.Plan.Limit), st.Plan.Explanation
		if st.Plan.Retry {
			r.NextAttemptAt = st.Plan.At
		}
	}
	switch {
	case st.Result == ResultSucceeded:
		r.State = RecoveryStateSucceeded
		r.Explanation = payments.RecoveredExplanation(r.Attempts, now)
	case st.Result == ResultSettled:
		r.State = payments.RecoverySettled
	case phase == phaseCharging:
		r.State = payments.RecoveryCharging
		r.Explanation = fmt.Sprintf("Charging attempt %d now.", st.Plan.Attempt)
	case st.Plan != nil && st.Plan.Retry:
		r.State = payments.RecoveryScheduled
	default:
		r.State = payments.RecoveryStopped
	}
	return r
}

// RecoveryStateSucceeded is the stored state of a recovery whose charge succeeded.
const RecoveryStateSucceeded = payments.RecoverySucceeded

// commit writes the recovery's state and ws, and, when the payment's card is known, entry in
// the card's ledger, in one transaction. Every write but the ledger's is "if newer": one that
// lost to a newer version is dropped and the rest commits.
func (s *Steps) commit(ctx context.Context, p payments.Payment, entry *cardledger.Entry, rec payments.Recovery, ws ...store.Write) error {
	groups := make([][]store.Write, len(ws))
	for i, w := range ws {
		groups[i] = []store.Write{w}
	}
	return s.commitGroups(ctx, p, entry, rec, groups...)
}

// commitGroups is commit for writes that stand or fall together: a group one of whose writes
// lost to a newer version is dropped whole (a payment's write and the change message that
// announces it, which must never commit alone). The recovery's own put and its pointers are
// one group too.
func (s *Steps) commitGroups(ctx context.Context, p payments.Payment, entry *cardledger.Entry, rec payments.Recovery, groups ...[]store.Write) error {
	rws, err := rec.Writes()
	if err != nil {
		return invalid("encode recovery %s: %w", rec.PaymentID, err)
	}
	groups = append([][]store.Write{rws}, groups...)
	for {
		var ws []store.Write
		for _, g := range groups {
			ws = append(ws, g...)
		}
		var err error
		if entry != nil && p.Card != nil {
			err = cardledger.Update(ctx, s.Store, payments.Table, p.Card.Fingerprint, p.Card.Brand, func(c *cardledger.Card) ([]store.Write, error) {
				c.Record(*entry, entry.At)
				return ws, nil
			})
		} else {
			err = s.Store.Transact(ctx, ws...)
		}
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index >= 0 && ce.Index < len(ws) {
			s.log().InfoContext(ctx, "recovery write older than the stored one; kept the stored one", "payment_id", p.ID, "write", ce.Index)
			for i, n := 0, 0; i < len(groups); i++ {
				if n += len(groups[i]); ce.Index < n {
					groups = slices.Delete(groups, i, i+1)
					break
				}
			}
			if len(groups) == 0 && (entry == nil || p.Card == nil) {
				return nil
			}
			continue
		}
		if err != nil {
			return &TransientError{Op: "record", Err: err}
		}
		return nil
	}
}

// deadLetter opens the dead-letter record of a recovery that stopped without a charge or whose
// step failed for good.
func (s *Steps) deadLetter(ctx context.Context, st State) (DeadLetterResult, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return DeadLetterResult{}, invalid("encode state: %w", err)
	}
	d := DeadLetter{Key: DeadLetterKey(st), Source: "recovery", PaymentID: st.PaymentID, Invoice: st.Invoice,
		Charges: st.Charges, Payload: payload, RetryOf: retryLink(st)}
	switch {
	case st.Error != nil:
		d.Reason = "step_failed"
		d.Explanation = fmt.Sprintf("Automatic recovery stopped because a step failed after its retries (%s).", st.Error.Error)
		d.SuggestedAction = "Check the payment at the provider, then retry the recovery or record the outcome by hand."
	case st.Plan != nil:
		d.Reason = string(st.Plan.Reason)
		d.Explanation = st.Plan.Explanation
		d.SuggestedAction = suggestedAction(*st.Plan)
	default:
		d.Reason = "step_failed"
		d.Explanation = "Automatic recovery stopped before it could plan an attempt."
		d.SuggestedAction = "Check the payment, then retry the recovery."
	}
	if d.Charges == nil {
		d.Charges = []Charge{}
	}
	if err := s.DeadLetters.Open(ctx, d); err != nil {
		return DeadLetterResult{}, &TransientError{Op: StepDeadLetter, Err: err}
	}
	// The recovery's stored state says it stopped and names the record a person works.
	rec, err := payments.GetRecovery(ctx, s.Store, st.PaymentID)
	if err != nil && !errors.Is(err, payments.ErrNotFound) {
		return DeadLetterResult{}, &TransientError{Op: StepDeadLetter, Err: err}
	}
	if errors.Is(err, payments.ErrNotFound) || rec.Round != st.Round {
		rec = s.recoveryRecord(st, payments.Payment{}, s.now(), phaseDeadLettered)
	}
	// The record's id, not its key: the console links to it. An operator's retry that stopped
	// again reopened the record it retried, whatever this round's key is.
	recordID := deadletter.RecordID(deadletter.Source(d.Source), d.Key)
	if d.RetryOf != nil {
		recordID = d.RetryOf.DeadLetterID
	}
	rec.State, rec.DeadLetter, rec.NextAttemptAt = payments.RecoveryStopped, recordID, time.Time{}
	rec.Seq = recoverySeq(st, phaseDeadLettered, s.now())
	if st.Error != nil {
		rec.Reason, rec.Explanation = d.Reason, d.Explanation
	}
	if err := s.commit(ctx, payments.Payment{ID: st.PaymentID}, nil, rec); err != nil {
		return DeadLetterResult{}, err
	}
	s.log().WarnContext(ctx, "recovery dead-lettered", "payment_id", st.PaymentID, "invoice", st.Invoice,
		"reason", d.Reason, "dead_letter", d.Key)
	return DeadLetterResult{ID: d.Key}, nil
}

// DeadLetterKey is the dead-letter record key of a recovery: one per payment and round.
func DeadLetterKey(st State) string {
	return "recovery:" + st.PaymentID + ":" + strconv.Itoa(st.Round)
}

// suggestedAction says what a person should do about a stopped plan.
func suggestedAction(p Plan) string {
	switch {
	case p.Reason == ReasonExhausted:
		return "Ask the customer to pay another way or update their payment method; automatic retries are used up."
	case p.Class == declines.ClassCancellation || p.Reason == ReasonCancelled:
		return "Treat the payment as cancelled by the customer; do not charge this card again."
	case p.Class == declines.ClassConfig:
		return "Fix the integration error, then retry the recovery."
	case p.Class == declines.ClassReview || p.NeedsReview:
		return "Review the payment before doing anything else: it may be a duplicate."
	case p.Class == declines.ClassHard:
		return "Do not retry this card; ask the customer for another payment method."
	case p.Class == declines.ClassAuth:
		return "Send the customer a payment link to authenticate the payment."
	case p.Class == declines.ClassData:
		return "Ask the customer to correct or update their card details, then retry the recovery."
	case p.NeedsCustomer:
		return "Ask the customer to update their payment method, then retry the recovery."
	}
	return "Review the payment and decide whether to retry it."
}

func (s *Steps) payment(ctx context.Context, id string) (payments.Payment, error) {
	p, err := payments.Get(ctx, s.Store, id)
	if errors.Is(err, payments.ErrNotFound) {
		return p, invalid("payment %s not found", id)
	}
	if err != nil {
		return p, &TransientError{Op: "read payment", Err: err}
	}
	return p, nil
}

func settled(status string) bool {
	switch status {
	case provider.StatusSucceeded, provider.StatusRefunded, provider.StatusCanceled:
		return true
	}
	return false
}

func classifyDecline(d *provider.Decline) declines.Classification {
	if d == nil {
		return declines.Classify(declines.Decline{})
	}
	return declines.Classify(declines.FromProvider(*d))
}

// providerError names a provider failure for Retry and Catch. Anything not known to be
// permanent is transient: the repeat carries the same attempt key, so it cannot charge twice.
func providerError(err error) error {
	var perm *provider.PermanentError
	var creds *provider.CredentialsError
	switch {
	case errors.As(err, &perm), errors.As(err, &creds), errors.Is(err, provider.ErrMissingIdempotencyKey):
		return &RejectedError{Op: StepCharge, Err: err}
	}
	return &TransientError{Op: StepCharge, Err: err}
}
