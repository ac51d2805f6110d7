package recon

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// Kind names a kind of difference between our records and the provider's (stored and
// reported as its "class").
type Kind string

// The kinds, in the order reports and metrics list them.
const (
	MissingLocally    Kind = "missing_locally"     // at the provider, no local payment: a lost webhook
	MissingAtProvider Kind = "missing_at_provider" // a local payment the provider does not have: a silent failure
	StatusMismatch    Kind = "status_mismatch"
	AmountMismatch    Kind = "amount_mismatch" // amount or currency
	DuplicateCharge   Kind = "duplicate_charge"
	// Stuck is a payment of ours still in a non-final status past its bound
	// (payments.StuckAfter): nobody has told us how it ended.
	Stuck Kind = "stuck"
)

// Kinds lists every kind.
var Kinds = []Kind{MissingLocally, MissingAtProvider, StatusMismatch, AmountMismatch, DuplicateCharge, Stuck,
	RefundMissingLocally, RefundMissingAtProvider, RefundStatusMismatch}

// Difference is one disagreement, with both sides as evidence and what an operator should do.
type Difference struct {
	// Key identifies the difference across runs: the same disagreement found by overlapping
	// windows has the same key; a changed one (another status, another amount) a new key.
	Key               string    `json:"key"`
	Kind              Kind      `json:"class"`
	PaymentID         string    `json:"payment_id,omitempty"`
	ProviderPaymentID string    `json:"provider_payment_id,omitempty"`
	Explanation       string    `json:"explanation"`
	SuggestedAction   string    `json:"suggested_action"`
	RunID             string    `json:"run_id,omitempty"`
	FoundAt           time.Time `json:"found_at"`
	// Local is our record; nil when we have none.
	Local *payments.Payment `json:"local,omitempty"`
	// Provider holds the provider's payments involved (two or more for a duplicate charge).
	Provider []Remote `json:"provider,omitempty"`
	// Refund is the refund a refund difference is about (refunds.go).
	Refund *RefundEvidence `json:"refund,omitempty"`
}

// Remote is the evidence of one provider payment.
type Remote struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	Amount      int64             `json:"amount"`
	Currency    string            `json:"currency"`
	Customer    string            `json:"customer,omitempty"`
	Description string            `json:"description,omitempty"`
	Created     time.Time         `json:"created"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	DeclineCode string            `json:"decline_code,omitempty"`
}

func remoteOf(p provider.Payment) Remote {
	r := Remote{ID: p.ID, Status: string(p.Status), Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
		Description: p.Description, Created: p.Created.UTC(), Metadata: p.Metadata}
	if p.Decline != nil {
		r.DeclineCode = p.Decline.Code
	}
	return r
}

// diffKey derives a difference's key from its class, the ids involved and what differs, so it
// is the same in every run that finds the same disagreement.
func diffKey(c Kind, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(c))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return "diff_" + string(c) + "_" + hex.EncodeToString(h.Sum(nil))[:24]
}

func sortedIDs(rs []provider.Payment) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}

func joinIDs(rs []provider.Payment) string { return strings.Join(sortedIDs(rs), ", ") }
