package recovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/payments"
)

// RetryLink ties an execution to the dead-letter record an operator retried: the record's id
// and the retry's id. An execution started for a retry charges at once (a "charge now")
// instead of re-planning from the decline that stopped the last round, and its end closes the
// record's loop: a success resolves it (RetryCloser), a stop reopens it with the attempt
// appended (DeadLetter.RetryOf), never a new record.
type RetryLink struct {
	DeadLetterID string `json:"dead_letter_id"`
	RetryID      string `json:"retry_id"`
}

// ReasonChargeNow is the reason of a plan an operator asked for.
const ReasonChargeNow Reason = "charge_now"

// RetryCloser is told when the charge of a retried recovery succeeded (or found the payment
// settled). The dead-letter sink implements it next to DeadLetterSink; Steps calls it when its
// sink does. It must be idempotent: the step that calls it runs at least once.
type RetryCloser interface {
	RetrySucceeded(ctx context.Context, l RetryLink, result string) error
}

// ChargeNowPlan plans the charge an operator asked for at now: at once, unless the decline or
// a card network's cap forbids it, which the stopped plan then names (with the moment the
// card may next be charged). The recovery's own schedule and maximum do not apply: a person
// decided. A hard decline or a revoked authorization is never charged again on the same card.
func ChargeNowPlan(in Input, now time.Time) Plan {
	c := in.Classification
	// Never before the attempt being answered (a recovery's own clock may have run ahead).
	if n := len(in.Charges); n > 0 {
		now = latest(now, in.Charges[n-1].At.Add(time.Second))
	}
	now = ceilSecond(now).UTC()
	plan := Plan{Attempt: len(in.Charges), Class: c.Class, NeedsCustomer: c.NeedsCustomer, NeedsReview: c.NeedsReview,
		Reason: ReasonChargeNow}
	if c.Class == declines.ClassHard || c.Class == declines.ClassCancellation {
		plan.Reason = stopReason(c)
		plan.Explanation = fmt.Sprintf("Not charging now because %s; the card networks forbid charging this card again. "+
			"Ask the customer for another payment method.", clause(c.Explanation))
		return plan
	}
	for _, cp := range networkCaps(c.Network) {
		if t, ok := cp.earliest(in, now); ok && t.After(now) {
			plan.Reason, plan.Limit = ReasonExhausted, cp.limit
			plan.Explanation = fmt.Sprintf("Not charging now because that would break %s; the card may next be charged on %s.",
				capText[cp.limit], t.UTC().Format("2 Jan 2006 at 15:04:05 MST"))
			return plan
		}
	}
	plan.Retry, plan.At, plan.Attempt = true, now, len(in.Charges)+1
	plan.Explanation = "Charging now, as an operator asked (a retry of the dead-letter record)."
	return plan
}

// ChargeNow starts the execution of a retry of a stopped recovery: round (the retry's number
// plus one, so a second click on the same retry names the same execution and starts nothing),
// the earlier attempts so that the caps count them, and the link to the record.
func (r *Recoverer) ChargeNow(ctx context.Context, p payments.Payment, round int, prior []Charge, link RetryLink) error {
	key := p.Invoice
	if key == "" {
		key = p.ID
	}
	if prior == nil {
		prior = []Charge{}
	}
	name := ExecutionName(key, round)
	input, err := json.Marshal(State{PaymentID: p.ID, Invoice: p.Invoice, Round: max(round, 1), Charges: prior, ChargeNow: &link})
	if err != nil {
		return err
	}
	if err := r.Starter.Start(ctx, name, input); err != nil {
		return err
	}
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "recovery charge-now started", "payment_id", p.ID, "execution", name,
		"dead_letter", link.DeadLetterID, "retry_id", link.RetryID)
	return nil
}

// retryLink is the link of the execution a state belongs to: in the execution's input (read
// by the first plan step), then in the plan.
func retryLink(st State) *RetryLink {
	if st.Plan != nil && st.Plan.ChargeNow != nil {
		return st.Plan.ChargeNow
	}
	return st.ChargeNow
}

// closeRetry tells the sink that a retried recovery ended with the payment paid.
func (s *Steps) closeRetry(ctx context.Context, st State, result string) error {
	l := retryLink(st)
	rc, ok := s.DeadLetters.(RetryCloser)
	if l == nil || !ok {
		return nil
	}
	if err := rc.RetrySucceeded(ctx, *l, result); err != nil {
		return &TransientError{Op: "close retry", Err: err}
	}
	return nil
}
