package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/outbox"
)

// DisputeFollowOns returns the outbox handler that opens a dispute's dead-letter record
// (KindDisputeEvidence, which the worker commits with the dispute). Table.Open is idempotent on
// the dispute id, so a redelivered message is the same record.
func DisputeFollowOns(t deadletter.Opener) map[string]outbox.Handler {
	return map[string]outbox.Handler{KindDisputeEvidence: func(ctx context.Context, m outbox.Message) error {
		var de DisputeEvidence
		if err := json.Unmarshal(m.Payload, &de); err != nil {
			return fmt.Errorf("worker: dispute message %s: %w", m.ID, err)
		}
		due := "soon"
		if de.Dispute.EvidenceDueBy != nil {
			due = "by " + de.Dispute.EvidenceDueBy.UTC().Format(time.RFC1123)
		}
		expl := fmt.Sprintf("The customer disputed payment %s (%s %d %s, reason %q); the dispute %s is %s and the provider needs our evidence %s, or the money goes back to the customer.",
			de.PaymentID, de.ProviderPaymentID, de.Dispute.Amount, de.Currency, de.Dispute.Reason, de.Dispute.ID, de.Dispute.Status, due)
		_, _, err := t.Open(ctx, deadletter.Record{Source: deadletter.SourceWebhook, Key: "dispute#" + de.Dispute.ID,
			Class: deadletter.ClassDisputeEvidenceDue, PaymentID: de.PaymentID, EventID: de.EventID, Payload: m.Payload,
			Facts:       deadletter.Facts{PaymentID: de.PaymentID, Provider: "stripe", Remote: de.Dispute.Status},
			Explanation: expl,
			SuggestedAction: "Gather the order's evidence (receipt, delivery proof, the customer's communication) and submit it in the provider's dashboard before the deadline, " +
				"or accept the dispute; then resolve this record with a note.",
			Attempts: []deadletter.Attempt{{At: m.CreatedAt, Error: "dispute " + de.Dispute.Status}}})
		return err
	}}
}
