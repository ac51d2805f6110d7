package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// The refund ledger: one item per payment (PK "refunds#<payment id>" in Table) holding every
// refund of it, ours and any made elsewhere (the provider's dashboard), under an
// optimistic-concurrency version. It is the one home of what a payment has refunded:
//
//   - a refund asked for through the API reserves its amount on the ledger before the provider
//     call, in one transaction with its idempotency key (idempotency.Keeper.Checkpoint), so
//     concurrent refunds can never together exceed what was captured;
//   - the provider's answer and its refund events move each refund along its own lifecycle
//     (provider.RefundRank: reserved, pending, succeeded, then failed or canceled; never back), so a
//     duplicated or reordered event changes nothing;
//   - a refund the provider refused, or that failed or was canceled later, no longer holds its
//     amount: what remains is refundable again. A failure also opens a dead-letter record
//     (KindRefundFailed, committed with the change);
//   - the payment's amount_refunded and its refunded status are computed from the ledger and
//     written in the same transaction.
//
// The charge's cumulative amount_refunded (charge.refunded) cannot be ordered against a later
// failure, so once a payment's ledger holds a refund it is the ledger, not that figure, that
// decides (Applier: refundsDecide).

// refundLedgerPrefix keys a payment's refund ledger in Table.
const refundLedgerPrefix = "refunds#"

// holds reports whether a refund in status st holds its amount (counts against what remains).
func holds(st string) bool {
	return st == provider.RefundReserved || st == provider.RefundPending || st == provider.RefundSucceeded
}

// RefundEntry is one refund of a payment.
type RefundEntry struct {
	// ID is ours (RefundID) for a refund asked for through the API, the provider's id for one
	// made elsewhere.
	ID               string `json:"id"`
	ProviderRefundID string `json:"provider_refund_id,omitempty"`
	// Key and ProviderKey are the caller's Idempotency-Key and the provider key derived from it;
	// empty for a refund made elsewhere.
	Key         string `json:"key,omitempty"`
	ProviderKey string `json:"provider_key,omitempty"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
	// FailureReason is the provider's reason for a failed refund (expired_or_canceled_card, ...).
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// RefundLedger is a payment's refunds, oldest first.
type RefundLedger struct {
	PaymentID string        `json:"payment_id"`
	Refunds   []RefundEntry `json:"refunds"`
	version   int64         // the stored version; 0: not stored yet
}

// RefundID derives our refund id for (scope, key): every retry of one refund request names the
// same refund.
func RefundID(scope, key string) string {
	return "rf_" + idempotency.Derive("refund", scope, key)[:24]
}

// Held is what the ledger's refunds hold of the captured amount: reserved, pending and
// succeeded refunds.
func (l RefundLedger) Held() int64 {
	var n int64
	for _, e := range l.Refunds {
		if holds(e.Status) {
			n += e.Amount
		}
	}
	return n
}

// Refunded is what the provider has accepted to refund (pending and succeeded refunds), the
// payment's amount_refunded: Stripe's charge counts a pending refund as refunded too.
func (l RefundLedger) Refunded() int64 {
	var n int64
	for _, e := range l.Refunds {
		if e.Status == provider.RefundPending || e.Status == provider.RefundSucceeded {
			n += e.Amount
		}
	}
	return n
}

// Remaining is what can still be refunded of captured.
func (l RefundLedger) Remaining(captured int64) int64 { return max(captured-l.Held(), 0) }

// Entry returns the refund with our id or the provider's id.
func (l *RefundLedger) Entry(id string) (*RefundEntry, bool) {
	for i := range l.Refunds {
		if l.Refunds[i].ID == id || (id != "" && l.Refunds[i].ProviderRefundID == id) {
			return &l.Refunds[i], true
		}
	}
	return nil, false
}

// Report applies the provider's view of one refund: found by the provider's id, else by our id
// (the twice_refund_id metadata our refunds carry, for a refund whose answer we never got),
// else adopted as a refund made elsewhere. The status moves only forward along
// provider.RefundRank. It
// reports whether anything changed.
func (l *RefundLedger) Report(r provider.Refund, now time.Time) bool {
	e, ok := l.Entry(r.ID)
	if !ok && r.Metadata[MetaRefundID] != "" {
		e, ok = l.Entry(r.Metadata[MetaRefundID])
	}
	if !ok {
		st := string(r.Status)
		if _, known := provider.RefundRank(st); !known || r.ID == "" || r.Amount <= 0 {
			return false
		}
		created := r.Created.UTC()
		if created.IsZero() {
			created = now.UTC()
		}
		l.Refunds = append(l.Refunds, RefundEntry{ID: capField(r.ID), ProviderRefundID: capField(r.ID), Amount: r.Amount,
			Currency: capField(r.Currency), Status: st, Reason: capField(string(r.Reason)),
			FailureReason: capField(r.FailureReason), CreatedAt: created, UpdatedAt: now.UTC()})
		return true
	}
	changed := false
	if e.ProviderRefundID == "" && r.ID != "" {
		e.ProviderRefundID, changed = capField(r.ID), true
	}
	cur, _ := provider.RefundRank(e.Status)
	if rank, known := provider.RefundRank(string(r.Status)); known && rank > cur {
		e.Status, changed = string(r.Status), true
		if r.FailureReason != "" {
			e.FailureReason = capField(r.FailureReason)
		}
	}
	if changed {
		e.UpdatedAt = now.UTC()
	}
	return changed
}

// remove drops a reservation the provider never acted on (it refused, or the call failed
// before it was sent).
func (l *RefundLedger) remove(id string) bool {
	n := len(l.Refunds)
	l.Refunds = slices.DeleteFunc(l.Refunds, func(e RefundEntry) bool { return e.ID == id && e.Status == provider.RefundReserved })
	return len(l.Refunds) != n
}

// MetaRefundID is the metadata key our refunds carry at the provider: our refund id, so a
// refund event or listing finds the refund even when the API never learned the provider's id.
const MetaRefundID = "twice_refund_id"

// GetRefunds reads a payment's refund ledger; a payment never refunded has an empty one.
func GetRefunds(ctx context.Context, st store.Store, paymentID string) (RefundLedger, error) {
	it, err := st.Get(ctx, Table, refundLedgerPrefix+paymentID, "")
	if errors.Is(err, store.ErrNotFound) {
		return RefundLedger{PaymentID: paymentID}, nil
	}
	if err != nil {
		return RefundLedger{}, err
	}
	var l RefundLedger
	if err := json.Unmarshal(it.Doc, &l); err != nil {
		return RefundLedger{}, fmt.Errorf("payments: stored refunds of %s: %w", paymentID, err)
	}
	l.version = it.Version
	return l, nil
}

// write is the ledger's put, conditioned on the version it was read at.
func (l RefundLedger) write() (store.Write, error) {
	doc, err := json.Marshal(l)
	if err != nil {
		return store.Write{}, err
	}
	c := store.Cond{Kind: store.VersionIs, Version: l.version}
	if l.version == 0 {
		c = store.Cond{Kind: store.NotExists}
	}
	return store.Write{Table: Table, Put: &store.Item{PK: refundLedgerPrefix + l.PaymentID, Doc: doc, Version: l.version + 1}, Cond: c}, nil
}

// Captured is what can be refunded of p at most: what a partial capture took (AmountReceived),
// or else its amount.
func Captured(p Payment) int64 {
	if p.AmountReceived > 0 && p.AmountReceived < p.Amount {
		return p.AmountReceived
	}
	return p.Amount
}

// setRefunded records amount as p's amount refunded and the status it implies: refunded once
// all of it is, succeeded while part of it is (a refunded charge was a successful one) or when
// a failed refund gave a whole refund back. It reports whether p changed.
func (p *Payment) setRefunded(amount int64, at time.Time) bool {
	st := p.Status
	switch {
	case amount > 0 && amount >= Captured(*p):
		st = provider.StatusRefunded
	case amount > 0 || p.Status == provider.StatusRefunded:
		st = provider.StatusSucceeded
	}
	if amount == p.AmountRefunded && st == p.Status {
		return false
	}
	p.AmountRefunded, p.Status, p.UpdatedAt = amount, st, at.UTC()
	if st == provider.StatusSucceeded {
		p.Decline, p.DeclineClass = nil, ""
	}
	// Each change of the ledger is news, whatever the provider's clock says: one step above the
	// stored version, which also makes the write fail if the payment moved meanwhile.
	p.Version++
	return true
}

// ErrNoChange is what a RefundUpdate callback returns to commit nothing.
var ErrNoChange = errors.New("payments: no change to the refunds")

// RefundUpdate describes one change of a payment's refunds.
type RefundUpdate struct {
	PaymentID string
	Now       time.Time
	// Source and EventID say where the change came from ("api", "webhook", "reconciliation"),
	// for the dead-letter record a failed refund opens.
	Source  string
	EventID string
	// Commit writes ws in one transaction with the caller's own writes (the idempotency key's
	// checkpoint, a webhook's dedupe records). It must report a failed condition on ws as a
	// *store.ConditionError whose Index counts from ws[0], and any other write's as another
	// error.
	Commit func(ctx context.Context, ws []store.Write) error
}

// updateTries bounds the re-reads when another writer changed the ledger or the payment.
const updateTries = 64

// UpdateRefunds reads the payment and its refund ledger, lets fn change the ledger (ErrNoChange:
// nothing to write), and commits the ledger, the payment's amount refunded and status, the
// change on the event feed and a dead-letter message per newly failed refund, in one
// transaction through u.Commit. A concurrent change of the ledger or the payment re-reads and
// runs fn again. It returns the payment and ledger as committed (or as read, for ErrNoChange).
func UpdateRefunds(ctx context.Context, st store.Store, u RefundUpdate, fn func(p *Payment, l *RefundLedger) error) (Payment, RefundLedger, error) {
	var rng *rand.Rand
	for try := 0; ; try++ {
		p, err := Get(ctx, st, u.PaymentID)
		if err != nil {
			return Payment{}, RefundLedger{}, err
		}
		l, err := GetRefunds(ctx, st, u.PaymentID)
		if err != nil {
			return Payment{}, RefundLedger{}, err
		}
		before := map[string]string{}
		for _, e := range l.Refunds {
			before[e.ID] = e.Status
		}
		if err := fn(&p, &l); errors.Is(err, ErrNoChange) {
			return p, l, nil
		} else if err != nil {
			return Payment{}, RefundLedger{}, err
		}
		ws, err := refundWrites(&p, l, before, u)
		if err != nil {
			return Payment{}, RefundLedger{}, err
		}
		err = u.Commit(ctx, ws)
		var ce *store.ConditionError
		switch {
		case err == nil:
			l.version++
			return p, l, nil
		case errors.As(err, &ce) && ce.Index > 1, !errors.As(err, &ce) && !errors.Is(err, store.ErrConflict):
			return Payment{}, RefundLedger{}, err
		}
		// The ledger or the payment moved on: read again, after a short jittered wait so
		// racing writers spread out.
		if try+1 >= updateTries {
			return Payment{}, RefundLedger{}, fmt.Errorf("payments: refunds of %s kept changing: %w", u.PaymentID, store.ErrConflict)
		}
		if rng == nil {
			rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(try)))
		}
		t := time.NewTimer(time.Duration(rng.Int64N(int64(min(time.Millisecond<<min(try, 6), 50*time.Millisecond)))))
		select {
		case <-ctx.Done():
			t.Stop()
			return Payment{}, RefundLedger{}, ctx.Err()
		case <-t.C:
		}
	}
}

// refundWrites are the writes of one ledger change, the ledger first and the payment second
// (UpdateRefunds retries on their conditions).
func refundWrites(p *Payment, l RefundLedger, before map[string]string, u RefundUpdate) ([]store.Write, error) {
	lw, err := l.write()
	if err != nil {
		return nil, err
	}
	ws := []store.Write{lw}
	if p.setRefunded(l.Refunded(), u.Now) {
		pw, err := p.Put()
		if err != nil {
			return nil, err
		}
		cw, err := ChangeMessage(*p, u.Now)
		if err != nil {
			return nil, err
		}
		ws = append(ws, pw, cw)
	} else {
		// The payment's own write still guards against a concurrent change of it: the same
		// version, conditioned on being unchanged.
		pw, err := p.Put()
		if err != nil {
			return nil, err
		}
		pw.Cond = store.Cond{Kind: store.VersionIs, Version: p.Version}
		ws = append(ws, pw)
	}
	for _, e := range l.Refunds {
		if e.Status == provider.RefundFailed && before[e.ID] != provider.RefundFailed {
			m, err := outbox.New(KindRefundFailed, "refund#"+e.ID+"#failed", RefundFailure{PaymentID: p.ID,
				ProviderPaymentID: p.ProviderPaymentID, Refund: e, Remaining: l.Remaining(Captured(*p)),
				Source: u.Source, EventID: u.EventID}, u.Now)
			if err != nil {
				return nil, err
			}
			ws = append(ws, m)
		}
	}
	return ws, nil
}

// KindRefundFailed is the outbox kind that opens the dead-letter record of a refund that failed
// (payload RefundFailure), committed with the ledger change that records the failure.
const KindRefundFailed = "refund_failed"

// RefundFailure is the payload of a KindRefundFailed message.
type RefundFailure struct {
	PaymentID         string      `json:"payment_id"`
	ProviderPaymentID string      `json:"provider_payment_id"`
	Refund            RefundEntry `json:"refund"`
	// Remaining is what could be refunded again after the failure.
	Remaining int64  `json:"remaining"`
	Source    string `json:"source,omitempty"`
	EventID   string `json:"event_id,omitempty"`
}

// maxRefundField caps a provider string kept on a payment or its refund ledger (ids, statuses,
// reasons are far shorter).
const maxRefundField = 64

func capField(s string) string {
	if len(s) <= maxRefundField {
		return s
	}
	return s[:maxRefundField]
}

// RefundFollowOns returns the outbox handler that opens a failed refund's dead-letter record
// (KindRefundFailed, committed with the failure). Records.Open is idempotent on the refund id, so
// a redelivered message is the same record.
func RefundFollowOns(t deadletter.Opener) map[string]outbox.Handler {
	return map[string]outbox.Handler{KindRefundFailed: func(ctx context.Context, m outbox.Message) error {
		var rf RefundFailure
		if err := json.Unmarshal(m.Payload, &rf); err != nil {
			return fmt.Errorf("payments: refund failure message %s: %w", m.ID, err)
		}
		src := deadletter.SourceWebhook
		if rf.Source == string(deadletter.SourceReconciliation) {
			src = deadletter.SourceReconciliation
		}
		e := rf.Refund
		facts := deadletter.Facts{PaymentID: rf.PaymentID, EventID: rf.EventID, Provider: "stripe", Remote: e.FailureReason,
			Local: fmt.Sprintf("%d %s", e.Amount, e.Currency)}
		expl, action := deadletter.Explain(deadletter.CauseRefundFailed, facts)
		expl += fmt.Sprintf(" Refund %s (%s) of %d %s; %d %s can be refunded again.", e.ID, e.ProviderRefundID, e.Amount, e.Currency, rf.Remaining, e.Currency)
		_, _, err := t.Open(ctx, deadletter.Record{Source: src, Key: "refund#" + e.ID, Cause: deadletter.CauseRefundFailed,
			PaymentID: rf.PaymentID, EventID: rf.EventID, IdempotencyKey: e.Key, Payload: m.Payload, Facts: facts,
			Explanation: expl, SuggestedAction: action,
			Tries: []deadletter.Try{{At: m.CreatedAt, Error: "refund failed: " + orNone(e.FailureReason)}}})
		return err
	}}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
