// Package recoveryfn connects the recovery steps' dead letters to the dead-letter table.
package recoveryfn

import (
	"context"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/recovery"
)

// Sink is the recovery.DeadLetterSink on a dead-letter table. Table.Open is idempotent on the
// record id derived from DeadLetter.Key, as recovery requires.
type Sink struct{ Table deadletter.Opener }

var _ recovery.DeadLetterSink = Sink{}

// Open implements recovery.DeadLetterSink.
func (s Sink) Open(ctx context.Context, d recovery.DeadLetter) error {
	attempts := make([]deadletter.Attempt, 0, len(d.Attempts))
	for _, a := range d.Attempts {
		msg := string(a.Outcome)
		if a.Class != "" {
			msg += " (" + string(a.Class) + ")"
		}
		attempts = append(attempts, deadletter.Attempt{At: a.At, Error: msg})
	}
	_, _, err := s.Table.Open(ctx, deadletter.FromRecovery(deadletter.RecoveryDeadLetter{
		Key: d.Key, Source: d.Source, PaymentID: d.PaymentID, Invoice: d.Invoice, Reason: d.Reason,
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Attempts: attempts, Payload: d.Payload,
	}))
	return err
}
