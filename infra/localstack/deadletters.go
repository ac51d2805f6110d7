package localstack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
)

// recoveryDeadLetters opens the dead-letter record of a recovery that needs a person.
type recoveryDeadLetters struct{ table *deadletter.Table }

func (r recoveryDeadLetters) Open(ctx context.Context, d recovery.DeadLetter) error {
	rd := deadletter.RecoveryDeadLetter{Key: d.Key, Source: d.Source, PaymentID: d.PaymentID, Invoice: d.Invoice,
		Reason: d.Reason, Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Payload: d.Payload}
	for _, a := range d.Attempts {
		msg := string(a.Outcome)
		if a.Class != "" {
			msg += " (" + string(a.Class) + ")"
		}
		rd.Attempts = append(rd.Attempts, deadletter.Attempt{At: a.At, Error: msg})
	}
	// A recovery that stopped on the decline itself (not on its schedule) is filed under the
	// decline's class, so the console says what the issuer said.
	if n := len(d.Attempts); n > 0 && d.Reason != "exhausted" && d.Attempts[n-1].Class != "" {
		rd.Reason = string(deadletter.DeclineClass(d.Attempts[n-1].Class))
	}
	_, _, err := r.table.Open(ctx, deadletter.FromRecovery(rd))
	return err
}

// reconDeadLetters opens one dead-letter record per reconciliation difference.
type reconDeadLetters struct{ table *deadletter.Table }

func (r reconDeadLetters) Open(ctx context.Context, d recon.Difference) error {
	payload, err := json.Marshal(d)
	if err != nil {
		return err
	}
	facts := deadletter.Facts{PaymentID: d.PaymentID, Provider: "stripe"}
	if d.Local != nil {
		facts.Local = d.Local.Status
	}
	if len(d.Provider) > 0 {
		facts.Remote = d.Provider[0].Status
	}
	_, _, err = r.table.Open(ctx, deadletter.Record{Source: deadletter.SourceReconciliation, Key: d.Key,
		Class: deadletter.Class("recon_" + string(d.Class)), Facts: facts, Payload: payload, PaymentID: d.PaymentID,
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction,
		Attempts: []deadletter.Attempt{{At: d.FoundAt, Error: "found by reconciliation run " + d.RunID}}})
	return err
}

// requeuer carries out an operator's retry: a dead message goes back to the queue it died on,
// a stopped recovery starts a new round.
type requeuer struct{ s *Stack }

func (q requeuer) Requeue(ctx context.Context, t deadletter.Target, retryID string) error {
	switch t.Kind {
	case deadletter.TargetQueue:
		dst, ok := q.s.queues[strings.TrimSuffix(t.Queue, "-dlq")]
		if !ok {
			return fmt.Errorf("localstack: no queue %q to retry into", t.Queue)
		}
		_, err := dst.Send(ctx, t.Body, queue.SendOptions{Attributes: map[string]string{"retry_id": retryID}})
		return err
	case deadletter.TargetRecovery:
		p, err := payments.Get(ctx, q.s.store, t.PaymentID)
		if err != nil {
			return err
		}
		// Round 1 was the automatic recovery; retry n is round n+1, with its own attempt keys.
		return q.s.recoverer.Start(ctx, p, t.Retry+1)
	}
	return deadletter.ErrNotRetryable
}
