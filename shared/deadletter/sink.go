package deadletter

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

// Opener opens records; the sink and the recovery adapter depend on it, not on Records.
type Opener interface {
	Open(ctx context.Context, r Record) (Record, bool, error)
}

var _ Opener = (*Records)(nil)

// Sink turns dead SQS messages into records: the deadletter-sink function's handler.
type Sink struct {
	Records Opener
	// Now stamps tries whose message carries no SentTimestamp (default time.Now).
	Now func() time.Time
	// Metrics, when set, gets the open count from ReportOpen.
	Metrics *EMF
	// Count reads the open count for Metrics (Records.OpenCount).
	Count func(ctx context.Context) (int64, error)
}

// Handle opens the record of one dead message: the per-message func that sqsbatch runs for the
// deadletter-sink function. A message that cannot be stored fails alone, so SQS keeps it and
// delivers it again; the rest of the batch is kept.
func (s *Sink) Handle(ctx context.Context, m queue.Message) error {
	_, _, err := s.Records.Open(ctx, s.Record(m))
	return err
}

// ReportOpen sends the open count to Metrics, when both Metrics and Count are set: the
// deadletter-sink function runs it after each batch (sqsbatch.Batch.AfterBatch).
func (s *Sink) ReportOpen(ctx context.Context) {
	if s.Metrics != nil && s.Count != nil {
		if n, err := s.Count(ctx); err == nil {
			s.Metrics.Open(n, s.now())
		}
	}
}

func (s *Sink) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// QueueName is the queue name in an SQS ARN (arn:aws:sqs:region:account:NAME).
func QueueName(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// SourceOf maps a dead-letter queue name to its source: "...webhooks-dlq" is webhook,
// "...resolve-dlq" is resolve. A stack may prefix the names ("twice-prod-webhooks-dlq").
func SourceOf(dlq string) Source {
	switch {
	case strings.HasSuffix(dlq, "webhooks-dlq"), strings.HasSuffix(dlq, "webhook-dlq"):
		return SourceWebhook
	case strings.HasSuffix(dlq, "resolve-dlq"):
		return SourceResolve
	case strings.HasSuffix(dlq, "reconcile-dlq"):
		return SourceReconciliation
	case strings.HasSuffix(dlq, "outbox-dlq"):
		return SourceOutbox
	}
	return SourceUnknown
}

// Record builds the record for one dead message. The key is the business identity of the work
// when the body can be read (the provider's event id; the payment to resolve), so the same
// work dead-lettered twice, even as two messages, is one record; otherwise the message id.
func (s *Sink) Record(m queue.Message) Record {
	dlq := QueueName(m.Source)
	src := SourceOf(dlq)
	deliveries := m.ReceiveCount
	at := s.now().UTC()
	if !m.SentAt.IsZero() {
		at = m.SentAt.UTC()
	}
	att := Try{At: at, MessageID: m.ID, ReceiveCount: deliveries,
		Error: "delivered " + strconv.Itoa(deliveries) + " times without success; moved to " + dlq}
	body := json.RawMessage(m.Body)
	if !json.Valid(body) {
		q, _ := json.Marshal(string(m.Body)) // keep the bytes, as a JSON string
		body = q
	}
	r := Record{Source: src, Key: "msg:" + m.ID, Cause: CausePoison, Payload: body,
		Tries: []Try{att}, Facts: Facts{Deliveries: deliveries}}
	target := Target{Kind: TargetQueue, Queue: strings.TrimSuffix(dlq, "-dlq"), Body: json.RawMessage(m.Body)}

	switch src {
	case SourceWebhook:
		var d webhooks.Delivery
		if json.Unmarshal(m.Body, &d) != nil || d.Provider == "" {
			break
		}
		r.Facts.Provider = d.Provider
		r.Target = target
		if d.EventID == "" { // verified but without an id: the worker could never apply it
			r.Cause = CauseValidation
			break
		}
		r.Cause, r.Key, r.EventID, r.Facts.EventID = CauseProcessing, "webhook:"+d.Provider+":"+d.EventID, d.EventID, d.EventID
	case SourceOutbox:
		// Lambda's on-failure record for a stream batch: where the batch was, not the messages.
		var f struct {
			Batch struct {
				ShardID string `json:"shardId"`
				Start   string `json:"startSequenceNumber"`
				End     string `json:"endSequenceNumber"`
			} `json:"DDBStreamBatchInfo"`
		}
		if json.Unmarshal(m.Body, &f) != nil || f.Batch.ShardID == "" || f.Batch.Start == "" {
			break
		}
		r.Cause, r.Key = CauseFollowOnUndelivered, "outbox:"+f.Batch.ShardID+":"+f.Batch.Start+"-"+f.Batch.End
	case SourceResolve:
		var j resolveJob
		if json.Unmarshal(m.Body, &j) != nil || j.PaymentID == "" {
			break
		}
		r.Cause, r.Key, r.PaymentID, r.Facts.PaymentID = CauseHTTPUnknown, "resolve:"+j.PaymentID, j.PaymentID, j.PaymentID
		r.IdempotencyKey = j.Key
		r.Target = target
	case SourceReconciliation:
		reconFailure(&r, m)
	}
	// A retried message that died again (its consumer did not close the loop itself) belongs
	// to the record it was retried from, whatever key its body gives: Open reopens that one.
	if id := m.Attributes[AttrRecordID]; validIDs(id, m.Attributes[AttrRetryID]) {
		r.ID = id
	}
	return r
}

// resolveJob is what a record needs of a dead resolve message, a payments.ResolveJob: its
// payment and idempotency key. Reading these two fields here, rather than importing payments
// for the type, keeps the payment service (and what it links) out of the dead-letter sink;
// TestSinkTurnsDeadMessagesIntoRecords sends a real payments.ResolveJob through it.
type resolveJob struct {
	Key       string `json:"key"`
	PaymentID string `json:"payment_id"`
}

// reconFailure fills the record of a failed reconciliation run. Two senders use the queue: the
// reconciler's on-failure destination (a Lambda invocation record: requestPayload, and the
// error in responsePayload) and the schedule's dead-letter queue (the schedule's input, the
// error in message attributes). Both carry the scheduled time, which is the run's identity,
// so the two copies of one failed run are one record. There is no queue to retry to: the
// action is to invoke the reconciler again.
func reconFailure(r *Record, m queue.Message) {
	type input struct {
		ScheduledTime string `json:"scheduled_time,omitempty"`
		From          string `json:"from,omitempty"`
		To            string `json:"to,omitempty"`
	}
	var dest struct {
		RequestContext struct {
			Condition string `json:"condition"`
		} `json:"requestContext"`
		RequestPayload  *input `json:"requestPayload"`
		ResponsePayload struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		} `json:"responsePayload"`
	}
	if json.Unmarshal(m.Body, &dest) != nil {
		return
	}
	in, cause := dest.RequestPayload, ""
	if in != nil { // the Lambda destination's record
		cause = strings.TrimSpace(dest.ResponsePayload.ErrorType + ": " + dest.ResponsePayload.ErrorMessage)
		if dest.RequestContext.Condition != "" {
			cause += " (" + dest.RequestContext.Condition + ")"
		}
		r.Payload, _ = json.Marshal(in)
	} else { // the schedule's own dead letter: the body is the input
		in = &input{}
		if json.Unmarshal(m.Body, in) != nil {
			return
		}
		cause = m.Attributes["ERROR_MESSAGE"]
	}
	run := in.ScheduledTime
	if run == "" && in.From != "" {
		run = in.From + "/" + in.To
	}
	if run == "" {
		return
	}
	// Retry runs reconciliation over the same input again (the run id is the window).
	r.Cause, r.Key, r.Facts.Local = CauseReconRunFailed, "reconcile:"+run, run
	r.Target = Target{Kind: TargetReconcile, Body: r.Payload}
	if cause != "" && cause != ":" {
		r.Tries[0].Error = cause
	}
}

// ReconRunFailed is the record of a reconciliation run that failed, for a runner that calls
// the reconciler itself (the local stack's schedule): input is the run's input (recon.Event
// JSON, a window), which names the run, so a failure of the same run twice is one record. Its
// Retry runs reconciliation over the same input again (TargetReconcile).
func ReconRunFailed(input json.RawMessage, at time.Time) Record {
	return Record{Source: SourceReconciliation, Key: "reconcile:" + string(input), Cause: CauseReconRunFailed,
		Facts: Facts{Local: string(input)}, Payload: input,
		Tries:  []Try{{At: at.UTC(), Error: "the reconciliation run failed; the log says why"}},
		Target: Target{Kind: TargetReconcile, Body: input}}
}

// RecoveryDeadLetter mirrors recovery.DeadLetter, which this package does not import (neither
// package depends on the other); the recovery side converts with FromRecovery.
type RecoveryDeadLetter struct {
	Key             string
	Source          string
	PaymentID       string
	Invoice         string
	Reason          string
	Explanation     string
	SuggestedAction string
	Tries           []Try
	Payload         json.RawMessage
}

// FromRecovery builds the record for a recovery dead letter: recovery stopped for good. A
// decline in Reason ("decline_hard") is kept as the cause; anything else is
// exhausted_recovery. Retry restarts recovery for the payment.
func FromRecovery(d RecoveryDeadLetter) Record {
	cause := CauseExhaustedRecovery
	if c := Cause(d.Reason); strings.HasPrefix(d.Reason, "decline_") {
		if _, ok := texts[c]; ok {
			cause = c
		}
	}
	return Record{Source: SourceRecovery, Key: d.Key, Cause: cause, PaymentID: d.PaymentID,
		Facts:       Facts{PaymentID: d.PaymentID, Invoice: d.Invoice, Charges: len(d.Tries)},
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Tries: d.Tries, Payload: d.Payload,
		// The stopped state rides with the target: a retry's charge counts its attempts.
		Target: Target{Kind: TargetRecovery, PaymentID: d.PaymentID, Invoice: d.Invoice, Body: d.Payload}}
}
