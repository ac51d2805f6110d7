package recovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// Starter starts one execution of the recovery state machine. An execution that already
// exists under the name counts as started: Start returns nil.
type Starter interface {
	Start(ctx context.Context, executionName string, input []byte) error
}

var _ payments.DeclineHandler = (*Recoverer)(nil)

// maxNameLen is Step Functions' limit on execution names.
const maxNameLen = 80

// ExecutionName derives the execution name of recovery round (1 for the first) of the
// payment with the business key key (its invoice, or its id without one). It is a pure
// function, so every path that starts the same recovery (the API's decline, the
// payment_failed webhook, a replay) names the same execution and only the first one starts
// it. A key within Step Functions' name rules (1-80 characters, none of whitespace,
// <>{}[]?*"#%\^|~`$&,;:/ or control characters) is used as it is, "inv_42-r1"; any other
// key keeps its allowed characters (at most 40) and adds 16 hex digits of its SHA-256, so
// different keys stay different names.
func ExecutionName(key string, round int) string {
	suffix := "-r" + strconv.Itoa(max(round, 1))
	if key != "" && nameSafe(key) && len(key)+len(suffix) <= maxNameLen {
		return key + suffix
	}
	return hashedName(key, round)
}

// hashedName is ExecutionName's form for any key: its allowed characters (at most 40) and 16
// hex digits of its SHA-256.
func hashedName(key string, round int) string {
	suffix := "-r" + strconv.Itoa(max(round, 1))
	var b strings.Builder
	for _, c := range key {
		if b.Len() >= 40 {
			break
		}
		if c < 0x80 && nameSafe(string(c)) {
			b.WriteRune(c)
		}
	}
	sum := sha256.Sum256([]byte(key))
	return b.String() + "-" + hex.EncodeToString(sum[:8]) + suffix
}

func nameSafe(s string) bool {
	for _, c := range s {
		if c <= 0x20 || c >= 0x7f || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", c) {
			return false
		}
	}
	return true
}

// StartInput is the execution input of a recovery round for payment p: its ids and the round,
// nothing else (the plan step reads the payment).
func StartInput(p payments.Payment, round int) ([]byte, error) {
	// The execution input names the recovery only; the steps add the rest.
	return json.Marshal(struct {
		PaymentID string   `json:"payment_id"`
		Invoice   string   `json:"invoice"`
		Round     int      `json:"round"`
		Charges   []Charge `json:"attempts"`
	}{p.ID, p.Invoice, max(round, 1), []Charge{}})
}

// Recoverer starts recoveries for declined payments: it is the payments API's DeclineHandler
// and what the webhook worker calls on payment_intent.payment_failed.
//
// Every decline starts the state machine, hard ones included: the plan step stops a hard
// decline at once (4 transitions) and the dead-letter step records it, so one place explains
// every decline a person must act on.
type Recoverer struct {
	Starter Starter
	Log     *slog.Logger
}

// Declined starts round 1 of the recovery of p if p is declined; it is idempotent.
func (r *Recoverer) Declined(ctx context.Context, p payments.Payment) error {
	if p.Status != provider.StatusDeclined {
		return nil
	}
	return r.Start(ctx, p, 1)
}

// Start starts recovery round of p (an operator's re-run after the customer updated their
// card is round 2, 3, ...).
func (r *Recoverer) Start(ctx context.Context, p payments.Payment, round int) error {
	key := p.Invoice
	if key == "" {
		key = p.ID
	}
	name := ExecutionName(key, round)
	input, err := StartInput(p, round)
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
	log.InfoContext(ctx, "recovery started", "payment_id", p.ID, "invoice", p.Invoice, "execution", name)
	return nil
}
