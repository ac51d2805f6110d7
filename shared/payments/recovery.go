package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/cardledger"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// CardRef is the card a payment was last charged on, as the provider named it. Fingerprint
// keys the card's reattempt ledger (package cardledger, items in this table).
type CardRef struct {
	Fingerprint string `json:"fingerprint"`
	Brand       string `json:"brand,omitempty"`
	Last4       string `json:"last4,omitempty"`
}

// cardRef caps the provider's card fields before they are stored.
func cardRef(c *provider.Card) *CardRef {
	if c == nil || c.Fingerprint == "" {
		return nil
	}
	cut := func(s string, n int) string {
		if len(s) > n {
			return s[:n]
		}
		return s
	}
	return &CardRef{Fingerprint: cut(c.Fingerprint, 64), Brand: cut(c.Brand, 32), Last4: cut(c.Last4, 4)}
}

// SetCard records the card the provider charged, when it said which.
func (p *Payment) SetCard(c *provider.Card) {
	if r := cardRef(c); r != nil {
		p.Card = r
	}
}

// Recovery states, as GET /payments/{id} and the console show them.
const (
	RecoveryScheduled = "scheduled" // waiting for the next planned attempt
	RecoveryCharging  = "charging"  // an attempt is being made
	RecoverySucceeded = "succeeded" // a recovery charge succeeded
	RecoverySettled   = "settled"   // the payment was paid, refunded or canceled another way
	RecoveryStopped   = "stopped"   // no automatic retry left (a dead-letter record), or an operator stopped it
)

// Recovery is the stored state of a payment's recovery, written by the recovery steps as the
// execution moves (one item per payment, PK "recovery#<payment id>" in this table); running
// ones are listed on the index partition RunningRecoveries, soonest next attempt first, and
// found by customer and by invoice through pointer items (CustomerRecoveries,
// InvoiceRecoveries) that Writes commits with the recovery.
type Recovery struct {
	PaymentID string `json:"payment_id"`
	State     string `json:"state"`
	Round     int    `json:"round"`
	// Attempts counts the charges made so far, the original one included.
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Reason is the plan's reason code (funded_moment, backoff, exhausted, ...); Explanation
	// the plain-language sentence.
	Reason      string `json:"reason,omitempty"`
	Limit       string `json:"limit,omitempty"`
	Explanation string `json:"explanation"`
	CardBrand   string `json:"card_brand,omitempty"`
	Customer    string `json:"customer,omitempty"`
	Invoice     string `json:"invoice,omitempty"`
	Amount      int64  `json:"amount,omitempty"`
	Currency    string `json:"currency,omitempty"`
	DeadLetter  string `json:"dead_letter,omitempty"` // the record a stopped recovery opened
	// Resume is the outbox id of the timer that resumes the parked recovery; set while it is
	// scheduled, so that a steering signal can bring the timer forward.
	Resume    string    `json:"resume,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Seq orders the writes of one execution (and rounds after it): an older step's write
	// never overwrites a newer one.
	Seq int64 `json:"seq"`
}

// RunningRecoveries is the index partition of recoveries that are scheduled or charging,
// spread over shards by payment id: every step of every recovery rewrites its entry
// (docs/capacity.md).
var RunningRecoveries = store.Shards{Base: "recoveries#running", N: 16}

// Running reports whether the recovery may still charge.
func (r Recovery) Running() bool { return r.State == RecoveryScheduled || r.State == RecoveryCharging }

func recoveryPK(paymentID string) string { return "recovery#" + paymentID }

// Writes are the recovery's put, applied only if newer (Seq) than what is stored, followed by
// its pointers' puts while it runs, or their deletes once it has ended: one under its customer
// and one under its invoice, so steering reads one customer's or invoice's index partition
// instead of every running recovery. They belong in one transaction, and a caller that drops
// the recovery's put (an older state) drops them all: the pointers carry no condition of their
// own, so they follow the recovery's state only because they commit with it.
func (r Recovery) Writes() ([]store.Write, error) {
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	it := store.Item{PK: recoveryPK(r.PaymentID), Doc: doc, Version: r.Seq}
	sk := r.NextAttemptAt.UTC().Format(time.RFC3339) + "#" + r.PaymentID
	if r.Running() {
		it.IndexPK, it.IndexSK = RunningRecoveries.Of(r.PaymentID), sk
	}
	ws := []store.Write{{Table: Table, Put: &it, Cond: store.Cond{Kind: store.VersionBelow, Version: r.Seq}}}
	ref, err := json.Marshal(RecoveryRef{PaymentID: r.PaymentID, Customer: r.Customer, Invoice: r.Invoice})
	if err != nil {
		return nil, err
	}
	for _, p := range []struct{ pk, owner, index string }{
		{recoveryByCustomerPK(r.PaymentID), r.Customer, CustomerRecoveries(r.Customer)},
		{recoveryByInvoicePK(r.PaymentID), r.Invoice, InvoiceRecoveries(r.Invoice)},
	} {
		switch {
		case !r.Running():
			// Deleted whatever the owner: a pointer written under another never outlives the recovery.
			ws = append(ws, store.Write{Table: Table, Delete: &store.Key{PK: p.pk}})
		case p.owner != "":
			ws = append(ws, store.Write{Table: Table, Put: &store.Item{PK: p.pk, Doc: ref, IndexPK: p.index, IndexSK: sk}})
		}
	}
	return ws, nil
}

// RecoveryRef is a pointer item's document: the running recovery of PaymentID, under its
// customer's or its invoice's index partition.
type RecoveryRef struct {
	PaymentID string `json:"payment_id"`
	Customer  string `json:"customer,omitempty"`
	Invoice   string `json:"invoice,omitempty"`
}

func recoveryByCustomerPK(paymentID string) string { return "recovery-by-customer#" + paymentID }
func recoveryByInvoicePK(paymentID string) string  { return "recovery-by-invoice#" + paymentID }

// CustomerRecoveries is the index partition of a customer's running recoveries: written only by
// that customer's recoveries, so bounded by them.
func CustomerRecoveries(customer string) string { return "recoveries#customer#" + customer }

// InvoiceRecoveries is the index partition of an invoice's running recoveries.
func InvoiceRecoveries(invoice string) string { return "recoveries#invoice#" + invoice }

// GetRecovery reads a payment's recovery; ErrNotFound when it never had one.
func GetRecovery(ctx context.Context, s store.Store, paymentID string) (Recovery, error) {
	it, err := s.Get(ctx, Table, recoveryPK(paymentID), "")
	if errors.Is(err, store.ErrNotFound) {
		return Recovery{}, ErrNotFound
	}
	if err != nil {
		return Recovery{}, err
	}
	var r Recovery
	if err := json.Unmarshal(it.Doc, &r); err != nil {
		return Recovery{}, fmt.Errorf("payments: stored recovery of %s: %w", paymentID, err)
	}
	return r, nil
}

// ListRunningRecoveries lists running recoveries, soonest next attempt first (one page; the
// index is eventually consistent on DynamoDB, so a just-ended one may still show for a moment).
func ListRunningRecoveries(ctx context.Context, s store.Store, limit int, cursor string) ([]Recovery, string, error) {
	page, err := RunningRecoveries.Page(ctx, s, Table, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]Recovery, 0, len(page.Items))
	for _, it := range page.Items {
		var r Recovery
		if err := json.Unmarshal(it.Doc, &r); err != nil {
			return nil, "", fmt.Errorf("payments: stored recovery %s: %w", it.PK, err)
		}
		out = append(out, r)
	}
	return out, page.Cursor, nil
}

// ListRecoveriesOf lists one page of the running recoveries in index partition index
// (CustomerRecoveries or InvoiceRecoveries), soonest next attempt first. The index is
// eventually consistent on DynamoDB: a just-ended recovery may still show for a moment, so a
// caller that acts on one reads it first.
func ListRecoveriesOf(ctx context.Context, s store.Store, index string, limit int, cursor string) ([]RecoveryRef, string, error) {
	page, err := s.Query(ctx, store.Query{Table: Table, Index: true, PK: index, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]RecoveryRef, 0, len(page.Items))
	for _, it := range page.Items {
		var r RecoveryRef
		if err := json.Unmarshal(it.Doc, &r); err != nil || r.PaymentID == "" {
			return nil, "", fmt.Errorf("payments: stored recovery pointer %s: not one (%v)", it.PK, err)
		}
		out = append(out, r)
	}
	return out, page.Cursor, nil
}

// Current is the recovery as of now, for a payment whose status is paymentStatus: its
// explanation says what is true now, not what the last plan said. A recovery whose charge
// succeeded says it recovered the payment (the plan before the charge said "Retrying on 15
// Dec ..."), and a running one of a payment that was paid, refunded or canceled meanwhile says
// it will not charge again (its stored state catches up at its next step).
func (r Recovery) Current(paymentStatus string) Recovery {
	switch {
	case r.State == RecoverySucceeded:
		r.Explanation = RecoveredExplanation(r.Attempts, r.UpdatedAt)
	case r.Running() && (paymentStatus == provider.StatusSucceeded || paymentStatus == provider.StatusRefunded || paymentStatus == provider.StatusCanceled):
		r.Explanation = "Not retrying: the payment is " + paymentStatus + " already, so the recovery ends at its next step without a charge."
	}
	return r
}

// RecoveredExplanation is the explanation of a recovery whose charge of attempt n succeeded at at.
func RecoveredExplanation(n int, at time.Time) string {
	return fmt.Sprintf("Recovered: attempt %d succeeded on %s; nothing more will be charged.", n, at.UTC().Format("2 Jan 2006 15:04 UTC"))
}

// RecoveryView is the recovery object of GET /payments/{id}.
type RecoveryView struct {
	State         string  `json:"state"`
	Round         int     `json:"round"`
	Attempts      int     `json:"attempts"`
	NextAttemptAt *string `json:"next_attempt_at"`
	Reason        string  `json:"reason"`
	Limit         *string `json:"limit"`
	Explanation   string  `json:"explanation"`
}

// View is the API shape.
func (r Recovery) View() *RecoveryView {
	v := &RecoveryView{State: r.State, Round: r.Round, Attempts: r.Attempts, Reason: r.Reason,
		Limit: nonEmpty(r.Limit), Explanation: r.Explanation}
	if !r.NextAttemptAt.IsZero() && r.Running() {
		s := r.NextAttemptAt.UTC().Format(time.RFC3339)
		v.NextAttemptAt = &s
	}
	return v
}

// CardView is the card object of GET /payments/{id}: what the networks' caps still allow on
// the payment's card, across every payment charged on it.
type CardView struct {
	Brand string `json:"brand"`
	Last4 string `json:"last4,omitempty"`
	// AttemptsLeft is how many attempts the tightest network cap allows now; null for a network
	// without published caps.
	AttemptsLeft *int `json:"attempts_left"`
	// NextAllowedAt is when the card may next be charged (now, if AttemptsLeft > 0).
	NextAllowedAt *string `json:"next_allowed_at"`
	Limit         *string `json:"limit"`
}

// CardViewOf reads the card's ledger and says what it allows at now.
func CardViewOf(ctx context.Context, s store.Store, c CardRef, now time.Time) (*CardView, error) {
	card, err := cardledger.Get(ctx, s, Table, c.Fingerprint)
	if err != nil {
		return nil, err
	}
	if card.Brand == "" {
		card.Brand = c.Brand
	}
	v := &CardView{Brand: card.Brand, Last4: c.Last4}
	if a := card.Allowance(now); a.Capped {
		left, next := a.Left, a.NextAt.UTC().Format(time.RFC3339)
		v.AttemptsLeft, v.NextAllowedAt, v.Limit = &left, &next, nonEmpty(a.Limit)
	}
	return v, nil
}
