package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Steering a running recovery. A signal is first stored (one item per payment, "steer#<id>" in
// the payments table; a newer signal replaces an older one), then the recovery's parked wait
// is brought forward: its timer (the resume message, resume.go) is written again due now, so
// the resumed execution starts at once and goes to Steer. Whichever step comes next consumes
// the stored signal in the transaction of its own writes: the steer step of a resumed
// execution, or the charge step when the timer fired first; and the park step, when the
// signal came before it parked, brings its own timer forward. So a signal is applied exactly
// once, however the race between the signal and the recovery goes. Every signal (an
// operator's, Steerer.Steer; a provider event's, SteerMessages) is committed with a wake
// message instead of a call, and the relay brings the timer forward (WakeFollowOn) only while
// a signal is still pending: a wake never stores a signal, so a late one cannot steer a later
// wait.

// Steering actions.
const (
	ActionChargeNow = "charge_now" // charge soon (with the new payment method, if one is given), within the card caps
	ActionStop      = "stop"       // stop: the invoice was paid another way, or an operator stopped it
	// ActionReplan plans again from the payment's decline as it stands now: a later provider
	// event reclassified it (generic to authentication_required), so the running plan is
	// for a decline that is no longer the payment's. A class that may not retry stops the
	// recovery with its dead letter.
	ActionReplan = "replan"
)

// Steering reasons, for the explanations.
const (
	ReasonPaymentMethodUpdated = "payment_method_updated"
	ReasonInvoicePaid          = "invoice_paid"
	ReasonOperator             = "operator"
	ReasonReclassified         = "reclassified"
)

// Steer is a stored steering signal.
type Steer struct {
	PaymentID     string    `json:"payment_id"`
	Action        string    `json:"action"`
	Reason        string    `json:"reason"`
	PaymentMethod string    `json:"payment_method,omitempty"`
	Actor         string    `json:"actor,omitempty"` // the operator, for an operator's signal
	Note          string    `json:"note,omitempty"`
	At            time.Time `json:"at"`
}

func steerPK(paymentID string) string { return "steer#" + paymentID }

// Write is the signal's put.
func (s Steer) Write() (store.Write, error) {
	doc, err := json.Marshal(s)
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Table: payments.Table, Put: &store.Item{PK: steerPK(s.PaymentID), Doc: doc}}, nil
}

func (s Steer) consumed() store.Write {
	return store.Write{Table: payments.Table, Delete: &store.Key{PK: steerPK(s.PaymentID)}}
}

// GetSteer reads the payment's pending signal; nil when none.
func GetSteer(ctx context.Context, st store.Store, paymentID string) (*Steer, error) {
	it, err := st.Get(ctx, payments.Table, steerPK(paymentID), "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Steer
	if err := json.Unmarshal(it.Doc, &s); err != nil {
		return nil, fmt.Errorf("recovery: stored steering of %s: %w", paymentID, err)
	}
	return &s, nil
}

// ErrNotRunning: the payment has no running recovery to steer.
var ErrNotRunning = errors.New("recovery: the payment has no running recovery")

// Steerer stores signals and brings parked waits forward.
//
// Steer (operator-api's Steerer, the local stack's operator API's) commits the signal and a
// wake message (KindWake) in one transaction, so no crash between the two leaves a signal
// stored and its wait running to its planned moment. The outbox relay's Steerer, which has the
// Starter, delivers the wakes (WakeFollowOn) and the timers (ResumeFollowOn).
type Steerer struct {
	Store store.Store
	// Starter starts the resumed executions, for ResumeFollowOn.
	Starter Starter
	Now     func() time.Time
}

// KindWake is the outbox kind that brings a recovery's parked wait forward for a stored signal
// (payload Wake), committed with the signal.
const KindWake = "wake_recovery"

// Wake is a KindWake message: the payment whose signal was stored, and the signal's time.
type Wake struct {
	PaymentID string    `json:"payment_id"`
	At        time.Time `json:"at"`
}

// WakeID is the outbox id of the wake for signal sg: one per payment and signal, so a
// repeated commit of the same signal writes the same message.
func WakeID(sg Steer) string {
	return "wake#" + sg.PaymentID + "#" + sg.At.UTC().Format(time.RFC3339Nano)
}

// Steer stores the signal and commits, in the same transaction, the wake the relay delivers
// (WakeFollowOn). It is idempotent: a repeat stores the same signal and writes the same wake,
// whose delivery finds the wait already ended.
func (s *Steerer) Steer(ctx context.Context, sg Steer) (payments.Recovery, error) {
	rec, err := payments.GetRecovery(ctx, s.Store, sg.PaymentID)
	if errors.Is(err, payments.ErrNotFound) || (err == nil && !rec.Running()) {
		return rec, ErrNotRunning
	}
	if err != nil {
		return rec, err
	}
	if sg.At.IsZero() {
		sg.At = s.now().UTC()
	}
	w, err := sg.Write()
	if err != nil {
		return rec, err
	}
	m, err := outbox.New(KindWake, WakeID(sg), Wake{PaymentID: sg.PaymentID, At: sg.At.UTC()}, s.now())
	if err != nil {
		return rec, err
	}
	if err := s.Store.Transact(ctx, w, m); err != nil {
		return rec, err
	}
	return rec, nil // the relay brings the wait forward (WakeFollowOn), or the next step consumes the signal
}

func (s *Steerer) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// WakeFollowOn is the outbox relay's handler of KindWake: it brings the payment's parked wait
// forward if a signal is still pending. It never stores the signal again: a signal the next
// step already consumed (the charge when the timer fired first) must not steer a later round,
// so with no signal pending it does nothing, and a second delivery is harmless.
func (s *Steerer) WakeFollowOn() outbox.Handler {
	return func(ctx context.Context, m outbox.Message) error {
		var w Wake
		if err := json.Unmarshal(m.Payload, &w); err != nil || w.PaymentID == "" {
			return fmt.Errorf("recovery: wake message %s: not a wake (%v)", m.ID, err)
		}
		pending, err := GetSteer(ctx, s.Store, w.PaymentID)
		if err != nil || pending == nil {
			return err
		}
		// Read after the signal was stored: a park step committing its timer now reads the
		// signal after it, so one of the two always sees the other.
		rec, err := payments.GetRecovery(ctx, s.Store, w.PaymentID)
		if errors.Is(err, payments.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Resume == "" || rec.State != payments.RecoveryScheduled {
			return nil // between steps: the next one consumes the signal
		}
		return bringForward(ctx, s.Store, rec.Resume, s.now())
	}
}

// steer applies the stored signal in an execution resumed early for it.
func (s *Steps) steer(ctx context.Context, st State, now time.Time) (State, error) {
	st.Error = nil
	p, err := s.payment(ctx, st.PaymentID)
	if err != nil {
		return st, err
	}
	pending, err := GetSteer(ctx, s.Store, st.PaymentID)
	if err != nil {
		return st, &TransientError{Op: StepSteer, Err: err}
	}
	if pending == nil || st.Plan == nil {
		// Consumed already (a repeat of this step): wait again for the same plan.
		return st, nil
	}
	if settled(p.Status) {
		st = s.settle(ctx, st, p)
		return st, s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phaseEnded), pending.consumed())
	}
	if pending.Action == ActionStop {
		return s.stop(ctx, st, p, *pending, now)
	}
	if pending.Action == ActionReplan {
		return s.replan(ctx, st, p, *pending, now)
	}
	if pending.PaymentMethod != "" {
		st.PaymentMethod = pending.PaymentMethod
	}
	if st.PaymentMethod != "" && st.PaymentMethod != p.PaymentMethod {
		// The charge will use another card: its caps decide when, not the declined card's.
		if p.Card, err = s.chargedCard(ctx, p, st.PaymentMethod); err != nil {
			return st, err
		}
	}
	// Charge soon: now, unless the card's caps forbid it (then at the first moment they allow).
	card, err := s.card(ctx, p)
	if err != nil {
		return st, err
	}
	at := ceilSecond(now.Add(time.Second))
	why := "Charging now"
	plan := *st.Plan
	if a := card.Allowance(at); a.Capped && a.Left == 0 {
		at = a.NextAt
		why = fmt.Sprintf("Charging on %s, the first moment %s allows", at.UTC().Format("2 Jan at 15:04 MST"), capTextOf(a.Limit))
		plan.Limit = Limit(a.Limit)
	}
	cause := "an operator asked for it"
	switch pending.Reason {
	case ReasonPaymentMethodUpdated:
		cause = "the customer's payment method changed"
		if pending.PaymentMethod != "" {
			cause += " (now " + pending.PaymentMethod + ")"
		}
	case ReasonOperator:
		if pending.Actor != "" {
			cause = pending.Actor + " asked for it"
		}
	}
	plan.Retry, plan.At, plan.Reason = true, at.UTC(), ReasonSteered
	plan.Explanation = why + " because " + cause + "."
	st.Plan, st.Result = &plan, ResultDeclined
	s.log().InfoContext(ctx, "recovery steered: charge soon", "payment_id", st.PaymentID, "reason", pending.Reason,
		"payment_method", st.PaymentMethod, "at", plan.At)
	// Consumed here: the new payment method travels in the execution's state to the charge.
	return st, s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phasePlanned), pending.consumed())
}

// stop ends the recovery on a stop signal: settled when the invoice was paid another way,
// stopped by an operator otherwise. No dead letter: nobody needs to act.
func (s *Steps) stop(ctx context.Context, st State, p payments.Payment, sg Steer, now time.Time) (State, error) {
	plan := Plan{Attempt: len(st.Charges)}
	if st.Plan != nil {
		plan = *st.Plan
	}
	plan.Retry, plan.At = false, time.Time{}
	if sg.Reason == ReasonInvoicePaid {
		st.Result, plan.Reason = ResultSettled, ReasonSettledElsewhere
		plan.Explanation = "Not retrying because the invoice was paid another way."
	} else {
		st.Result, plan.Reason = ResultStopped, ReasonStoppedByOperator
		plan.Explanation = "Not retrying because an operator stopped the recovery"
		if sg.Actor != "" {
			plan.Explanation += " (" + sg.Actor + ")"
		}
		if sg.Note != "" {
			plan.Explanation += ": " + sg.Note
		}
		plan.Explanation += "."
	}
	st.Plan = &plan
	s.log().InfoContext(ctx, "recovery steered: stopped", "payment_id", st.PaymentID, "reason", sg.Reason, "actor", sg.Actor)
	return st, s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phaseEnded), sg.consumed())
}

// replan plans the recovery again from the payment's decline as now classified, consuming
// the signal: the next attempt's time, or, for a class that never retries (auth: the
// customer must authenticate), no retry, which the state machine turns into the dead letter
// that asks for the customer.
func (s *Steps) replan(ctx context.Context, st State, p payments.Payment, sg Steer, now time.Time) (State, error) {
	c := classifyDecline(p.Decline)
	card, err := s.card(ctx, p)
	if err != nil {
		return st, err
	}
	st, err = s.planNext(ctx, st, c, now, card)
	if err != nil {
		return st, err
	}
	st.Plan.Explanation = "The provider reclassified the decline as " + string(c.Class) + ". " + st.Plan.Explanation
	s.log().InfoContext(ctx, "recovery re-planned: the decline was reclassified", "payment_id", st.PaymentID,
		"class", c.Class, "retry", st.Plan.Retry)
	return st, s.commit(ctx, p, nil, s.recoveryRecord(st, p, now, phasePlanned), sg.consumed())
}

// ReplanMessages are the writes that make a running recovery of paymentID plan again (a
// signal and its wake, as SteerMessages commits them), for the webhook worker's transaction
// of an event that reclassified the payment's decline; none when no recovery is running.
func ReplanMessages(ctx context.Context, st store.Store, paymentID string, now time.Time) ([]store.Write, error) {
	rec, err := payments.GetRecovery(ctx, st, paymentID)
	if errors.Is(err, payments.ErrNotFound) || (err == nil && !rec.Running()) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sg := Steer{PaymentID: paymentID, Action: ActionReplan, Reason: ReasonReclassified, At: now.UTC()}
	signal, err := sg.Write()
	if err != nil {
		return nil, err
	}
	wake, err := outbox.New(KindWake, WakeID(sg), Wake{PaymentID: sg.PaymentID, At: sg.At}, now)
	if err != nil {
		return nil, err
	}
	return []store.Write{signal, wake}, nil
}

// Reasons of steered plans.
const (
	ReasonSteered           Reason = "steered"             // a steering signal asked to charge soon
	ReasonSettledElsewhere  Reason = "settled_elsewhere"   // the invoice was paid another way
	ReasonStoppedByOperator Reason = "stopped_by_operator" // an operator stopped the recovery
)

func capTextOf(limit string) string {
	if t, ok := capText[Limit(limit)]; ok {
		return t
	}
	return limit
}

// maxSteered bounds the recoveries one event steers, so the worker's transaction (two writes
// per recovery, beside the event's own) stays within DynamoDB's 100 items.
const maxSteered = 40

// steerPage is how many of a customer's or an invoice's running recoveries SteerMessages reads a
// page.
var steerPage = maxSteered

// SteerMessages are the writes that steer the running recoveries a customer-side event
// concerns (the recovery of the invoice paid, or every running recovery of the customer whose
// payment method changed), for the worker's transaction: each recovery's signal and its wake
// (KindWake), as an operator's signal is committed. The signal is stored once, with the event's
// dedupe records, so a redelivered event or a repeated wake never stores it again after the
// next step consumed it; the wake's id derives from the payment and the signal.
//
// It reads only the invoice's or the customer's index partition of running recoveries
// (payments.ListRecoveriesOf), soonest next attempt first, and then each recovery found, so
// an event costs reads in proportion to that owner's recoveries, never to every running one.
func SteerMessages(ctx context.Context, st store.Store, ev webhooks.Steer, now time.Time) ([]store.Write, error) {
	var index string
	switch {
	case ev.Invoice != "":
		index = payments.InvoiceRecoveries(ev.Invoice)
	case ev.Customer != "":
		index = payments.CustomerRecoveries(ev.Customer)
	default:
		return nil, nil
	}
	var ws []store.Write
	cursor := ""
	for {
		refs, next, err := payments.ListRecoveriesOf(ctx, st, index, steerPage, cursor)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			// The index lags the table on DynamoDB: a recovery that ended a moment ago is passed over.
			r, err := payments.GetRecovery(ctx, st, ref.PaymentID)
			if errors.Is(err, payments.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if !r.Running() {
				continue
			}
			sg := Steer{PaymentID: r.PaymentID, At: now.UTC()}
			switch {
			case ev.Invoice != "":
				if r.Invoice != ev.Invoice {
					continue
				}
				sg.Action, sg.Reason = ActionStop, ReasonInvoicePaid
			case r.Customer == ev.Customer:
				sg.Action, sg.Reason, sg.PaymentMethod = ActionChargeNow, ReasonPaymentMethodUpdated, ev.PaymentMethod
			default:
				continue
			}
			signal, err := sg.Write()
			if err != nil {
				return nil, err
			}
			wake, err := outbox.New(KindWake, WakeID(sg), Wake{PaymentID: sg.PaymentID, At: sg.At}, now)
			if err != nil {
				return nil, err
			}
			ws = append(ws, signal, wake)
			if len(ws) >= 2*maxSteered {
				return ws, nil
			}
		}
		if next == "" {
			return ws, nil
		}
		cursor = next
	}
}
