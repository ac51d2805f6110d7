package recon

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// Healing: a difference a machine can settle is settled, through payments.Applier (the path
// every webhook event takes), with the provider's payment as the truth. Which ones:
//   - missing locally, when the provider's payment names one of ours (twice_payment_id and
//     twice_scope in its metadata): our commit was lost after the provider call, or its
//     webhook was;
//   - a status mismatch where the provider is ahead of us on the lifecycle (pending or
//     processing to a final state, a decline later paid, a success later refunded in part or
//     in whole);
//   - a refund our ledger lacks or holds behind the provider (refunds.go), applied as a refund
//     event (payments.Applier.SettleRefund).
//
// Everything else is a decision for a person and opens a dead-letter record: an amount or
// currency mismatch, a duplicate charge, a payment missing at the provider, a status going
// backwards (refunded here but paid there, canceled here but charged there), a payment that
// is not ours.

// ProviderAhead reports whether the provider's payment is a later point of our payment's
// lifecycle, so applying it is catching up, not overruling: a settled status is ahead of one
// still in flight, and otherwise the later rank on the lifecycle (provider.StatusRank) is.
func ProviderAhead(local *payments.Payment, remote provider.Payment) bool {
	ls, rs := provider.Status(local.Status), remote.Status
	switch {
	case ls == provider.StatusCanceled:
		return false // terminal here: a charge there is for a person
	case ls == rs || ls == provider.StatusRefunded && rs == provider.StatusSucceeded:
		// The same status, or a partial refund shown as succeeded: refunds only grow.
		return remote.AmountRefunded > local.AmountRefunded
	case ls == provider.StatusSucceeded && rs == provider.StatusCanceled:
		return false
	case !ls.Final() && rs.Final():
		return true
	}
	return provider.StatusRank(rs) > provider.StatusRank(ls)
}

// healable returns the provider payment that settles d, if d is a difference a machine may
// settle.
func healable(d Difference, remotes map[string]provider.Payment) (provider.Payment, bool) {
	rp, ok := remotes[d.ProviderPaymentID]
	if !ok {
		return provider.Payment{}, false
	}
	switch d.Kind {
	case MissingLocally:
		// A payment still waiting for the customer or for a capture has no settled state to
		// record (Settle); it stays a difference for a person.
		return rp, rp.Metadata[payments.MetaPaymentID] != "" && rp.Metadata[payments.MetaScope] != "" &&
			rp.Status != provider.StatusRequiresAction && rp.Status != provider.StatusRequiresCapture
	case StatusMismatch:
		return rp, d.Local != nil && ProviderAhead(d.Local, rp)
	}
	return provider.Payment{}, false
}

// healableRefund returns the provider refund that settles d, if d is a refund difference the
// provider's view settles by moving ours forward (a refund our ledger lacks, or has behind).
func healableRefund(d Difference) (provider.Refund, bool) {
	if (d.Kind != RefundMissingLocally && d.Kind != RefundStatusMismatch) || d.Refund == nil || d.Refund.Provider == nil ||
		!d.Refund.ProviderAhead {
		return provider.Refund{}, false
	}
	return d.Refund.Provider.refund(), true
}

// expire settles a payment left waiting for its customer past the customer window: the
// difference's record (healed by this run) and the auto-cancel of the payment commit in one
// transaction, so the cancel is never lost behind a record that says it was decided. A rerun
// writes the same record and the same message (ids derive from the payment).
func (r *Reconciler) expire(ctx context.Context, d Difference) error {
	now := r.now()
	doc, err := json.Marshal(record{State: stateHealed, Difference: d, HealedBy: d.RunID})
	if err != nil {
		return err
	}
	m, err := payments.AutoCancelMessage(*d.Local, payments.ReasonCustomerWindow, now)
	if err != nil {
		return err
	}
	rec := store.Write{Table: DifferencesTable, Put: &store.Item{PK: d.Key, Doc: doc, ExpiresAt: now.Add(r.retention()).Unix()}}
	if err := r.Store.Transact(ctx, rec, m); err != nil {
		return fmt.Errorf("record auto-cancel of %s: %w", d.PaymentID, err)
	}
	r.log().InfoContext(ctx, "payment past its customer window; auto-cancel committed", "key", d.Key, "run_id", d.RunID,
		"payment_id", d.PaymentID, "provider_payment_id", d.ProviderPaymentID)
	return nil
}

// heal settles d through the Healer when it can, and records that run R healed it. A
// settlement that is not applied (ours turned out newer, the payment is not ours) falls back
// to opening the difference.
func (r *Reconciler) heal(ctx context.Context, d Difference, remotes map[string]provider.Payment) (bool, error) {
	if d.Kind == Stuck && d.Local != nil && d.Local.Status == provider.StatusRequiresAction {
		return true, r.expire(ctx, d)
	}
	if r.Healer == nil {
		return false, nil
	}
	var out payments.Effect
	var err error
	var status provider.Status
	if rf, ok := healableRefund(d); ok {
		status = provider.Status(rf.Status)
		out, err = r.Healer.SettleRefund(ctx, rf, "recon_heal/"+d.Key)
	} else if rp, ok := healable(d, remotes); ok {
		status = rp.Status
		out, err = r.Healer.Settle(ctx, rp, "recon_heal/"+d.Key)
	} else {
		return false, nil
	}
	if err != nil {
		r.log().WarnContext(ctx, "difference could not be healed; opening it", "key", d.Key, "run_id", d.RunID, "error", err)
		return false, nil
	}
	if out != payments.Applied {
		r.log().InfoContext(ctx, "healing changed nothing; opening the difference", "key", d.Key, "run_id", d.RunID, "outcome", out)
		return false, nil
	}
	now := r.now()
	doc, err := json.Marshal(record{State: stateHealed, Difference: d, HealedBy: d.RunID})
	if err != nil {
		return false, err
	}
	if err := r.Store.Put(ctx, DifferencesTable, store.Item{PK: d.Key, Doc: doc, ExpiresAt: now.Add(r.retention()).Unix()}, store.Cond{}); err != nil {
		return false, fmt.Errorf("record healed %s: %w", d.Key, err)
	}
	r.log().InfoContext(ctx, "difference healed by reconciliation run "+d.RunID, "key", d.Key, "class", d.Kind,
		"payment_id", d.PaymentID, "provider_payment_id", d.ProviderPaymentID, "provider_status", status)
	return true, nil
}
