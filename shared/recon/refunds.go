package recon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// Refunds in reconciliation: each payment's refund ledger (ours) is compared with the
// provider's list of its refunds (provider.Operations.Refunds), refund by refund. A refund
// is matched by the provider's id, else by the twice_refund_id metadata our refunds carry,
// exactly as the refund webhooks match it (payments.RefundLedger.Report).
//
// Which payments: only those with refunds on either side. The provider's payment carries
// amount_refunded, and our ledger is one local read, so a pass lists the refunds of a payment
// only when the provider says something was refunded or our ledger holds a refund: a window
// of payments without refunds costs no provider call more than before. A refund that failed at
// the provider and that we never heard of moved no money and is not looked for.
//
// What is decided:
//   - a provider refund our ledger lacks (its webhook was lost, or it was made in the
//     provider's dashboard) heals: it is applied through the refund path every refund event
//     takes (payments.Applier.SettleRefund), the same code a refund.updated delivery runs, so
//     it is adopted, amount_refunded and the status follow, and a failed one opens its dead
//     letter;
//   - a refund the provider has further along than we do (ours reserved or pending, theirs
//     succeeded or failed) heals the same way; one we hold further along is reported;
//   - a refund of ours that holds money (reserved, pending or succeeded) and that the provider
//     does not have is reported with an action: a reservation whose caller got a 202 and never
//     repeated the request holds its amount until someone does.

// The refund classes.
const (
	// RefundMissingLocally is a provider refund of one of our payments that our refund ledger
	// lacks.
	RefundMissingLocally Kind = "refund_missing_locally"
	// RefundMissingAtProvider is a refund on our ledger that holds money and that the provider
	// does not have.
	RefundMissingAtProvider Kind = "refund_missing_at_provider"
	// RefundStatusMismatch is a refund both sides have in different statuses.
	RefundStatusMismatch Kind = "refund_status_mismatch"
)

// RefundEvidence is the two sides of a refund difference.
type RefundEvidence struct {
	// Local is our ledger's entry; nil when we have none.
	Local *payments.RefundEntry `json:"local,omitempty"`
	// Provider is the provider's refund; nil when it has none.
	Provider *RemoteRefund `json:"provider,omitempty"`
	// ProviderAhead is set when applying the provider's refund moves ours forward (catching
	// up, not overruling): the difference heals.
	ProviderAhead bool `json:"provider_ahead,omitempty"`
}

// RemoteRefund is the evidence of one provider refund.
type RemoteRefund struct {
	ID            string            `json:"id"`
	Payment       string            `json:"payment"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	Reason        string            `json:"reason,omitempty"`
	FailureReason string            `json:"failure_reason,omitempty"`
	Created       time.Time         `json:"created"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

func remoteRefundOf(r provider.Refund) *RemoteRefund {
	return &RemoteRefund{ID: r.ID, Payment: r.Payment, Amount: r.Amount, Currency: r.Currency, Status: string(r.Status),
		Reason: string(r.Reason), FailureReason: r.FailureReason, Created: r.Created.UTC(), Metadata: r.Metadata}
}

func (r RemoteRefund) refund() provider.Refund {
	return provider.Refund{ID: r.ID, Payment: r.Payment, Amount: r.Amount, Currency: r.Currency, Status: provider.RefundStatus(r.Status),
		Reason: provider.RefundReason(r.Reason), FailureReason: r.FailureReason, Created: r.Created, Metadata: r.Metadata}
}

// mayHaveRefunds reports whether a payment's refunds are worth reading: ours may hold a ledger
// once it was paid, and the provider's payment says whether it refunded anything.
func mayHaveRefunds(p payments.Payment, rp provider.Payment, listed bool) bool {
	return p.Status == provider.StatusSucceeded || p.Status == provider.StatusRefunded || p.AmountRefunded > 0 ||
		listed && (rp.AmountRefunded > 0 || rp.Status == provider.StatusRefunded)
}

// gatherRefunds reads the refund ledgers of the snapshot's paid payments and lists, at the
// provider, the refunds of those with refunds on either side. A provider without
// provider.Operations leaves refunds uncompared. Payments are read Readers at a time: a read
// per paid payment, one after another, is what made a run of a few hundred payments under
// throttling outlast its deadline, each refused call adding its backoff to the rest.
func (r *Reconciler) gatherRefunds(ctx context.Context, snap *Snapshot) error {
	ops, ok := r.Provider.(provider.Operations)
	if !ok {
		return nil
	}
	remotes := map[string]provider.Payment{}
	for _, rp := range snap.Remote {
		remotes[rp.ID] = rp
	}
	snap.Ledgers = map[string]payments.RefundLedger{}
	snap.Refunds = map[string][]provider.Refund{}
	var (
		mu      sync.Mutex
		listing = map[string]bool{} // provider payments whose refunds one reader lists
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.readers())
	for _, p := range snap.Local {
		rp, listed := remotes[p.ProviderPaymentID]
		if p.ProviderPaymentID == "" || !listed || !mayHaveRefunds(p, rp, listed) {
			continue
		}
		g.Go(func() error {
			l, err := payments.GetRefunds(gctx, r.Store, p.ID)
			if err != nil {
				return err
			}
			mu.Lock()
			if len(l.Refunds) > 0 {
				snap.Ledgers[p.ID] = l
			}
			// No refund on either side: no provider call.
			skip := len(l.Refunds) == 0 && rp.AmountRefunded == 0 && rp.Status != provider.StatusRefunded || listing[rp.ID]
			listing[rp.ID] = listing[rp.ID] || !skip
			mu.Unlock()
			if skip {
				return nil
			}
			rs := []provider.Refund{}
			for rf, err := range ops.Refunds(gctx, provider.RefundListParams{Payment: rp.ID}) {
				if err != nil {
					return fmt.Errorf("refunds of %s: %w", rp.ID, err)
				}
				rs = append(rs, rf)
			}
			mu.Lock()
			snap.Refunds[rp.ID] = rs
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	if errors.Is(err, provider.ErrOperationsUnsupported) {
		snap.Ledgers, snap.Refunds = nil, nil
		return nil
	}
	return err
}

// refundsCompared reports whether the snapshot holds the provider's refunds of rp and they
// account for its amount_refunded (pending and succeeded, as Stripe's charge counts them):
// then the refunds are compared one by one, and the payment's own refunded figure and
// refunded status are not compared again. A figure the listed refunds do not explain is left
// to the payment's comparison.
func (c *classifier) refundsCompared(rp provider.Payment) bool {
	rs, ok := c.s.Refunds[rp.ID]
	if !ok {
		return false
	}
	var sum int64
	for _, r := range rs {
		if r.Status == provider.RefundPending || r.Status == provider.RefundSucceeded {
			sum += r.Amount
		}
	}
	return sum == rp.AmountRefunded || rp.Status == provider.StatusRefunded && rp.AmountRefunded == 0 && sum >= rp.Amount
}

// compareRefunds compares our ledger of p with the provider's refunds of r.
func (c *classifier) compareRefunds(p *payments.Payment, r provider.Payment) {
	remote := slices.Clone(c.s.Refunds[r.ID])
	slices.SortFunc(remote, func(a, b provider.Refund) int { return a.Created.Compare(b.Created) })
	led := c.s.Ledgers[p.ID]
	matched := map[string]bool{}
	for _, rf := range remote {
		e := entryFor(&led, rf)
		if e == nil {
			c.refundMissingLocally(p, r, rf)
			continue
		}
		matched[e.ID] = true
		c.compareRefundStatus(p, r, *e, rf)
	}
	for _, e := range led.Refunds {
		if !matched[e.ID] {
			c.refundMissingAtProvider(p, r, e)
		}
	}
}

// entryFor finds the ledger's entry for a provider refund as RefundLedger.Report does: by the
// provider's id, else by our id in its metadata.
func entryFor(l *payments.RefundLedger, rf provider.Refund) *payments.RefundEntry {
	if e, ok := l.Entry(rf.ID); ok {
		return e
	}
	if id := rf.Metadata[payments.MetaRefundID]; id != "" {
		if e, ok := l.Entry(id); ok {
			return e
		}
	}
	return nil
}

// refundAhead reports whether applying rf to our entry e moves it forward, by the ledger's own
// rule (RefundLedger.Report), so the rule has one home.
func refundAhead(e payments.RefundEntry, rf provider.Refund, now time.Time) bool {
	e.ProviderRefundID = rf.ID
	l := payments.RefundLedger{Refunds: []payments.RefundEntry{e}}
	l.Report(rf, now)
	return l.Refunds[0].Status != e.Status
}

func (c *classifier) refundMissingLocally(p *payments.Payment, r provider.Payment, rf provider.Refund) {
	if c.young(rf.Created) {
		return // its webhook is probably on its way
	}
	rs := fmt.Sprintf("refund %s of %s (%s", rf.ID, money(rf.Amount, rf.Currency), rf.Status)
	if rf.FailureReason != "" {
		rs += ": " + rf.FailureReason
	}
	rs += ")"
	c.add(Difference{Key: diffKey(RefundMissingLocally, p.ID, rf.ID), Kind: RefundMissingLocally, PaymentID: p.ID,
		ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)},
		Refund: &RefundEvidence{Provider: remoteRefundOf(rf), ProviderAhead: true},
		Explanation: fmt.Sprintf("The provider has %s on payment %s (%s), but our refund ledger has no such refund: its webhook was probably lost, or it was made in the provider's dashboard.",
			rs, p.ID, r.ID),
		SuggestedAction: "Replay the refund's latest event (refund.updated) so our ledger adopts it, then check what the refund reverses (the order, the subscription)."},
		p.CreatedAt, rf.Created, c.s.Changed[r.ID])
}

func (c *classifier) compareRefundStatus(p *payments.Payment, r provider.Payment, e payments.RefundEntry, rf provider.Refund) {
	ours := e.View(p.ID).Status
	if e.Status == string(rf.Status) || c.young(e.UpdatedAt) {
		return
	}
	ahead := refundAhead(e, rf, c.s.Now)
	action := "We hold this refund further along than the provider does: check it in the provider's dashboard and correct our record with an override and a note; if the customer did not get the money, refund again with a new Idempotency-Key."
	if ahead {
		action = "Replay the refund's latest event (refund.updated) so our ledger catches up with the provider."
		if rf.Status == provider.RefundFailed {
			action += " The refund failed: the customer has not got the money back, and the amount is refundable again."
		}
	}
	c.add(Difference{Key: diffKey(RefundStatusMismatch, p.ID, e.ID, e.Status, string(rf.Status)), Kind: RefundStatusMismatch,
		PaymentID: p.ID, ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)},
		Refund: &RefundEvidence{Local: &e, Provider: remoteRefundOf(rf), ProviderAhead: ahead},
		Explanation: fmt.Sprintf("Refund %s of %s on payment %s is %s in our records (%s on the ledger) but %s at the provider (%s).",
			e.ID, money(e.Amount, e.Currency), p.ID, ours, e.Status, rf.Status, rf.ID),
		SuggestedAction: action}, p.CreatedAt, e.CreatedAt, rf.Created, c.s.Changed[r.ID])
}

func (c *classifier) refundMissingAtProvider(p *payments.Payment, r provider.Payment, e payments.RefundEntry) {
	if (e.Status != provider.RefundReserved && e.Status != provider.RefundPending && e.Status != provider.RefundSucceeded) || c.young(e.UpdatedAt) {
		return // a failed or canceled refund holds no money; a young one is still on its way
	}
	amount := money(e.Amount, e.Currency)
	var expl, action string
	if e.Status == provider.RefundReserved {
		expl = fmt.Sprintf("Refund %s of %s on payment %s was reserved on %s for the caller's Idempotency-Key %q, but the provider has no such refund of %s: the provider call's outcome was unknown (answered 202) and the request was never repeated. The %s stays held: it cannot be refunded again, and the customer has not got it back.",
			e.ID, amount, p.ID, e.CreatedAt.UTC().Format("2 Jan 2006 15:04 MST"), e.Key, r.ID, amount)
		action = fmt.Sprintf("Repeat the request: POST /payments/%s/refunds with Idempotency-Key %q and the same body. The provider's key derives from it, so the customer is refunded at most once. If the customer should not be refunded after all, resolve this record with a note.",
			p.ID, e.Key)
	} else {
		expl = fmt.Sprintf("Our refund ledger holds refund %s (%s) of %s on payment %s as %s, but the provider lists no such refund of %s: the customer may not have got the money back.",
			e.ID, orDash(e.ProviderRefundID), amount, p.ID, e.Status, r.ID)
		action = "Look for the refund in the provider's dashboard. If there is none, refund again with a new Idempotency-Key (or pay the customer another way) and resolve this record with a note; if there is one, replay its event."
	}
	c.add(Difference{Key: diffKey(RefundMissingAtProvider, p.ID, e.ID), Kind: RefundMissingAtProvider, PaymentID: p.ID,
		ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)}, Refund: &RefundEvidence{Local: &e},
		Explanation: expl, SuggestedAction: action}, p.CreatedAt, e.CreatedAt)
}

func orDash(s string) string {
	if s == "" {
		return "no provider id"
	}
	return s
}
