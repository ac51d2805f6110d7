package recon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// Snapshot is what one run compares: both sides of a window, plus what was fetched one by one
// at its edges.
type Snapshot struct {
	Window Window
	// Now is when the snapshot was taken; ages are measured against it.
	Now time.Time
	// Local holds our payments created in the window, and those the provider's payments in the
	// window point to (by metadata twice_payment_id or provider id) wherever they were created.
	Local []payments.Payment
	// Remote holds the provider's payments listed over the window, and those fetched by id for
	// local payments the list did not have. A local payment whose provider id is absent here is
	// missing at the provider.
	Remote []provider.Payment
	// Changed holds, per provider payment id, its newest event in the window (when the
	// reconciler reads the provider's events): a change, not only a creation, places a
	// difference in the window.
	Changed map[string]time.Time
	// Open holds our payments whose bound for a non-final status (Bounds.StuckAfter) ends in
	// the window: created that long before it. Those still in that status are stuck.
	Open []payments.Payment
	// Bounds are the bounds Open was gathered with (zero: the defaults).
	Bounds payments.Bounds
	// Ledgers holds the refund ledgers of our payments that have one, by payment id.
	Ledgers map[string]payments.RefundLedger
	// Refunds holds, per provider payment id, every refund the provider lists of it, for the
	// payments with refunds on either side (refunds.go); a payment absent here had none.
	Refunds map[string][]provider.Refund
}

// Classify compares a snapshot and returns its differences in a stable order. It is pure: the
// reconciler gathers the snapshot, Classify decides.
//
// A difference is reported only if its newest evidence was created inside the window: windows
// move forward, so every difference lands in some window, and the margin's extras belong to the
// next one. And only once settled: a local payment that is
// pending or processing, or was changed less than grace ago, and a provider payment younger
// than grace with no local record, are still in flight (a webhook on its way, an unknown outcome
// being resolved), not differences.
func Classify(s Snapshot, grace time.Duration) []Difference {
	c := classifier{s: s, grace: grace, seen: map[string]bool{}}
	c.run()
	return c.out
}

type classifier struct {
	s     Snapshot
	grace time.Duration
	seen  map[string]bool
	out   []Difference
}

func (c *classifier) run() {
	local := map[string]*payments.Payment{}
	byProviderID := map[string]string{}
	for i := range c.s.Local {
		p := &c.s.Local[i]
		local[p.ID] = p
		if p.ProviderPaymentID != "" {
			byProviderID[p.ProviderPaymentID] = p.ID
		}
	}
	remotes := uniqueRemotes(c.s.Remote)

	linked := map[string][]provider.Payment{}
	for _, r := range remotes {
		id := r.Metadata["twice_payment_id"]
		if _, ok := local[id]; !ok {
			id = byProviderID[r.ID]
		}
		if id == "" {
			c.missingLocally(r)
			continue
		}
		linked[id] = append(linked[id], r)
	}

	ids := make([]string, 0, len(local))
	for id := range local {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.comparePayment(local[id], linked[id])
	}
	c.invoiceDuplicates(remotes, local, byProviderID)
	for i := range c.s.Open {
		c.stuck(&c.s.Open[i])
	}
}

// stuck reports a payment still in a non-final status past its bound. Its evidence time is the
// moment the bound ran out, so the one window that holds that moment reports it.
func (c *classifier) stuck(p *payments.Payment) {
	bound := c.s.Bounds.StuckAfter(p.Status)
	if bound == 0 {
		return
	}
	due := p.CreatedAt.Add(bound)
	if c.s.Now.Before(due) {
		return
	}
	since := p.CreatedAt.UTC().Format("2 Jan 2006 15:04 MST")
	var expl, action string
	switch p.Status {
	case provider.StatusRequiresAction:
		expl = fmt.Sprintf("Payment %s (%s) has waited for its customer to authenticate since %s, more than %s: the customer did not complete it.",
			p.ID, money(p.Amount, p.Currency), since, duration(bound))
		action = "Nothing: twice cancels it at the provider (cancellation reason abandoned). If it is still waiting, cancel it with POST /payments/" + p.ID + "/cancel and ask the customer to pay again."
	case provider.StatusRequiresCapture:
		lapse := "about 7 days after the authorization"
		if !p.CaptureBefore.IsZero() {
			lapse = p.CaptureBefore.UTC().Format("2 Jan 2006 15:04 MST")
		}
		expl = fmt.Sprintf("Payment %s (%s) was authorized on %s and is still held, uncaptured, after %s: the hold lapses at %s and then nothing can be captured.",
			p.ID, money(p.Amount, p.Currency), since, duration(bound), lapse)
		action = "Capture it before the hold lapses (POST /payments/" + p.ID + "/capture) if the order is fulfilled, or cancel it (POST /payments/" + p.ID + "/cancel) to release the customer's funds."
	case provider.StatusPending:
		expl = fmt.Sprintf("Payment %s (%s) has been pending since %s: its outcome is still unknown more than %s after it was made, past the time the provider remembers its idempotency key, so repeating the call no longer proves it safe.",
			p.ID, money(p.Amount, p.Currency), since, duration(bound))
		action = "Look the payment up at the provider (its metadata names " + p.ID + "): if it was charged, replay its webhook or override with the provider's status; if there is no charge, mark it failed and tell the customer."
	default:
		expl = fmt.Sprintf("Payment %s (%s) has been %s since %s, more than %s: the provider has not said whether the money moved.",
			p.ID, money(p.Amount, p.Currency), p.Status, since, duration(bound))
		action = "Check the payment at the provider: if it settled, replay its webhook or override with the provider's status; if it is still processing there (a bank debit can take days), resolve this record with a note and look again later."
	}
	c.add(Difference{Key: diffKey(Stuck, p.ID, p.Status), Kind: Stuck, PaymentID: p.ID, ProviderPaymentID: p.ProviderPaymentID,
		Local: localEvidence(p), Explanation: expl, SuggestedAction: action}, due)
}

// duration says a bound in words: "24 hours", "7 days".
func duration(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 24*time.Hour {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return fmt.Sprintf("%d hours", int(d.Hours()))
}

// uniqueRemotes drops repeats (a payment both listed and fetched) and orders by id.
func uniqueRemotes(rs []provider.Payment) []provider.Payment {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b provider.Payment) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b provider.Payment) bool { return a.ID == b.ID })
}

func (c *classifier) add(d Difference, created ...time.Time) {
	if c.seen[d.Key] {
		return
	}
	newest := slices.MaxFunc(created, func(a, b time.Time) int { return a.Compare(b) })
	if !c.s.Window.Contains(newest) {
		return
	}
	c.seen[d.Key] = true
	d.FoundAt = c.s.Now.UTC()
	c.out = append(c.out, d)
}

func (c *classifier) young(t time.Time) bool { return c.s.Now.Sub(t) < c.grace }

func (c *classifier) missingLocally(r provider.Payment) {
	if c.young(r.Created) {
		return // the payments API may still be writing its record
	}
	what := "a payment"
	if r.Status == provider.StatusSucceeded {
		what = "a successful payment"
	}
	expl := fmt.Sprintf("The provider has %s %s of %s for customer %q (status %s) but we have no record of it: a webhook was probably lost, or our write failed after the provider call.",
		what, r.ID, money(r.Amount, r.Currency), r.Customer, r.Status)
	if id := r.Metadata["twice_payment_id"]; id != "" {
		expl += fmt.Sprintf(" It names our payment %s, which does not exist.", id)
	}
	action := "Check the customer's order: create the payment record from the provider's (replay the webhook), or refund it at the provider if nothing was sold."
	c.add(Difference{Key: diffKey(MissingLocally, r.ID), Kind: MissingLocally, PaymentID: r.Metadata["twice_payment_id"],
		ProviderPaymentID: r.ID, Explanation: expl, SuggestedAction: action, Provider: []Remote{remoteOf(r)}}, r.Created)
}

// comparePayment compares one local payment with the provider payments that belong to it.
func (c *classifier) comparePayment(p *payments.Payment, rs []provider.Payment) {
	primary := primaryOf(p, rs)
	if primary == nil {
		c.missingAtProvider(p)
	} else {
		c.compareStatus(p, *primary)
		c.compareAmount(p, *primary)
		if c.refundsCompared(*primary) {
			c.compareRefunds(p, *primary)
		}
	}
	var charged []provider.Payment
	for _, r := range rs {
		if r.Status == provider.StatusSucceeded {
			charged = append(charged, r)
		}
	}
	if len(charged) > 1 {
		c.duplicate(p, charged, fmt.Sprintf("our payment %s", p.ID))
	}
}

// primaryOf picks the provider payment that stands for p: the one it names, or, when it names
// none yet (an unknown outcome), the one that took money, else the newest.
func primaryOf(p *payments.Payment, rs []provider.Payment) *provider.Payment {
	if p.ProviderPaymentID != "" {
		for i := range rs {
			if rs[i].ID == p.ProviderPaymentID {
				return &rs[i]
			}
		}
		return nil
	}
	var best *provider.Payment
	for i := range rs {
		r := &rs[i]
		switch {
		case best == nil, r.Status == provider.StatusSucceeded && best.Status != provider.StatusSucceeded:
			best = r
		case (r.Status == provider.StatusSucceeded) == (best.Status == provider.StatusSucceeded) && r.Created.After(best.Created):
			best = r
		}
	}
	return best
}

func settledAt(p *payments.Payment) time.Time {
	if p.UpdatedAt.After(p.CreatedAt) {
		return p.UpdatedAt
	}
	return p.CreatedAt
}

func (c *classifier) missingAtProvider(p *payments.Payment) {
	local := localEvidence(p)
	if p.ProviderPaymentID != "" {
		c.add(Difference{Key: diffKey(MissingAtProvider, p.ID, p.ProviderPaymentID), Kind: MissingAtProvider,
			PaymentID: p.ID, ProviderPaymentID: p.ProviderPaymentID, Local: local,
			Explanation: fmt.Sprintf("We recorded payment %s (%s, status %s) as provider payment %s, but the provider has no such payment.",
				p.ID, money(p.Amount, p.Currency), p.Status, p.ProviderPaymentID),
			SuggestedAction: "Check the provider's dashboard for the customer; if no money moved, mark our payment failed (override) and tell the customer; never deliver goods on it."}, p.CreatedAt)
		return
	}
	if provider.Status(p.Status).Final() || c.young(settledAt(p)) {
		return // a young unknown outcome is still being resolved
	}
	c.add(Difference{Key: diffKey(MissingAtProvider, p.ID, ""), Kind: MissingAtProvider, PaymentID: p.ID, Local: local,
		Explanation: fmt.Sprintf("Payment %s (%s) has been %s since %s with an unknown outcome, and the provider has no payment for it in the window.",
			p.ID, money(p.Amount, p.Currency), p.Status, settledAt(p).UTC().Format(time.RFC3339)),
		SuggestedAction: "The provider probably never received the request: retry it with the same Idempotency-Key (safe), or mark it failed and tell the customer."}, p.CreatedAt)
}

func (c *classifier) compareStatus(p *payments.Payment, r provider.Payment) {
	ls, rs := provider.Status(p.Status), r.Status
	refundedOnly := func(s provider.Status) bool { return s == provider.StatusSucceeded || s == provider.StatusRefunded }
	switch {
	case c.refundsCompared(r) && refundedOnly(ls) && refundedOnly(rs):
		return // a difference of refunds only: compared refund by refund
	case ls == rs:
		c.compareRefunded(p, r)
		return
	}
	switch {
	case !ls.Final() && !rs.Final():
		return // both still in flight
	case !ls.Final() && c.young(settledAt(p)):
		return // the webhook that tells us is probably on its way
	}
	action := "Replay the provider's latest event for this payment (or override our status to the provider's), then check what was delivered to the customer."
	switch {
	case rs == provider.StatusSucceeded && ls != provider.StatusRefunded:
		action = "The customer was charged: update our payment to succeeded (replay the webhook or override) and make sure the order was fulfilled."
	case ls == provider.StatusSucceeded && rs != provider.StatusRefunded:
		action = "We treat this payment as paid but the provider does not: check whether the goods went out and collect again or cancel the order."
	case rs == provider.StatusRefunded:
		action = "The payment was refunded at the provider: update our payment to refunded (replay charge.refunded) and reverse what it paid for."
	}
	c.add(Difference{Key: diffKey(StatusMismatch, p.ID, r.ID, string(ls), string(rs)), Kind: StatusMismatch,
		PaymentID: p.ID, ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)},
		Explanation:     fmt.Sprintf("Payment %s is %s in our records but %s at the provider (%s).", p.ID, ls, rs, r.ID),
		SuggestedAction: action}, p.CreatedAt, r.Created, c.s.Changed[r.ID])
}

// compareRefunded compares the amount refunded of a payment whose status agrees (a partial
// refund leaves both succeeded).
func (c *classifier) compareRefunded(p *payments.Payment, r provider.Payment) {
	if p.AmountRefunded == r.AmountRefunded || c.young(c.s.Changed[r.ID]) {
		return
	}
	c.add(Difference{Key: diffKey(StatusMismatch, p.ID, r.ID, string(r.Status), money(p.AmountRefunded, p.Currency), money(r.AmountRefunded, r.Currency)),
		Kind: StatusMismatch, PaymentID: p.ID, ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)},
		Explanation: fmt.Sprintf("Payment %s has %s refunded in our records but %s at the provider (%s).",
			p.ID, money(p.AmountRefunded, p.Currency), money(r.AmountRefunded, r.Currency), r.ID),
		SuggestedAction: "Replay the provider's charge.refunded event for this payment (or override), then check what the refund reverses."},
		p.CreatedAt, r.Created, c.s.Changed[r.ID])
}

func (c *classifier) compareAmount(p *payments.Payment, r provider.Payment) {
	if p.Amount == r.Amount && strings.EqualFold(p.Currency, r.Currency) {
		return
	}
	c.add(Difference{Key: diffKey(AmountMismatch, p.ID, r.ID, money(p.Amount, p.Currency), money(r.Amount, r.Currency)),
		Kind: AmountMismatch, PaymentID: p.ID, ProviderPaymentID: r.ID, Local: localEvidence(p), Provider: []Remote{remoteOf(r)},
		Explanation: fmt.Sprintf("Payment %s is for %s in our records but %s at the provider (%s).",
			p.ID, money(p.Amount, p.Currency), money(r.Amount, r.Currency), r.ID),
		SuggestedAction: "Find out which amount the customer agreed to: refund the difference at the provider, or correct our record with an override and a note."}, p.CreatedAt, r.Created, c.s.Changed[r.ID])
}

func (c *classifier) duplicate(p *payments.Payment, charged []provider.Payment, why string) {
	slices.SortFunc(charged, func(a, b provider.Payment) int { return strings.Compare(a.ID, b.ID) })
	created := make([]time.Time, 0, len(charged)+1)
	ev := make([]Remote, len(charged))
	for i, r := range charged {
		ev[i] = remoteOf(r)
		created = append(created, r.Created)
	}
	d := Difference{Key: diffKey(DuplicateCharge, sortedIDs(charged)...), Kind: DuplicateCharge, Provider: ev,
		Explanation: fmt.Sprintf("The customer was charged %d times for %s: provider payments %s all succeeded.",
			len(charged), why, joinIDs(charged)),
		SuggestedAction: "Refund all but one of the provider payments (keep the one our record names) and tell the customer."}
	if p != nil {
		d.PaymentID, d.ProviderPaymentID, d.Local = p.ID, p.ProviderPaymentID, localEvidence(p)
		created = append(created, p.CreatedAt)
	}
	c.add(d, created...)
}

// invoiceDuplicates finds succeeded provider payments for one customer, invoice, amount and
// currency under different payments of ours (or none): two idempotency keys for one invoice.
func (c *classifier) invoiceDuplicates(remotes []provider.Payment, local map[string]*payments.Payment, byProviderID map[string]string) {
	groups := map[string][]provider.Payment{}
	var order []string
	for _, r := range remotes {
		if r.Status != provider.StatusSucceeded {
			continue
		}
		inv := r.Metadata["twice_invoice"]
		if inv == "" {
			if p := local[byProviderID[r.ID]]; p != nil {
				inv = p.Invoice
			}
		}
		if inv == "" {
			continue
		}
		g := strings.Join([]string{r.Customer, inv, money(r.Amount, r.Currency)}, "\x00")
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], r)
	}
	for _, g := range order {
		if rs := groups[g]; len(rs) > 1 {
			inv := strings.Split(g, "\x00")[1]
			c.duplicate(nil, rs, fmt.Sprintf("invoice %s", inv))
		}
	}
}

func localEvidence(p *payments.Payment) *payments.Payment {
	cp := *p
	return &cp
}

func money(amount int64, currency string) string {
	return fmt.Sprintf("%d %s", amount, strings.ToLower(currency))
}
