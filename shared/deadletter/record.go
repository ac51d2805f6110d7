package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Status is where a record stands in an operator's work.
type Status string

// The statuses. Open is the only one the alarm counts: work nobody has picked up.
const (
	StatusOpen       Status = "open"
	StatusRetrying   Status = "retrying"
	StatusResolved   Status = "resolved"
	StatusOverridden Status = "overridden"
	StatusIgnored    Status = "ignored"
)

// Statuses lists every status, in the order the console shows them.
var Statuses = []Status{StatusOpen, StatusRetrying, StatusResolved, StatusOverridden, StatusIgnored}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Source names what produced the dead work.
type Source string

// The sources.
const (
	SourceWebhook        Source = "webhook"
	SourceResolve        Source = "resolve"
	SourceRecovery       Source = "recovery"
	SourceReconciliation Source = "reconciliation"
	// SourceOutbox is follow-on work the outbox relay could not deliver within Lambda's retries
	// (the stream's on-failure destination).
	SourceOutbox  Source = "outbox"
	SourceUnknown Source = "unknown"
)

// Sources lists the known sources.
var Sources = []Source{SourceWebhook, SourceResolve, SourceRecovery, SourceReconciliation, SourceOutbox, SourceUnknown}

// Try is one try at the work before it died: a delivery of the message, a charge, a
// reconciliation run. (The attempt log's exchanges are attempts.Attempt; a record links to
// them by its ids.) It is stored under "attempts".
type Try struct {
	At time.Time `json:"at"`
	// Error is what went wrong, already safe to show an operator (redacted).
	Error string `json:"error,omitempty"`
	// Response is what came back, if anything (redacted, capped).
	Response string `json:"response,omitempty"`
	// MessageID is the SQS message id for queue-borne work; the sink uses it to notice the
	// same dead message delivered twice.
	MessageID    string `json:"message_id,omitempty"`
	ReceiveCount int    `json:"receive_count,omitempty"`
}

// TargetKind says how a retry is carried out.
type TargetKind string

// The target kinds.
const (
	// TargetQueue re-sends Body to the queue the message came from.
	TargetQueue TargetKind = "queue"
	// TargetRecovery starts a new recovery round for PaymentID that charges at once (a charge
	// now, within the card networks' caps); Body holds the stopped round's state.
	TargetRecovery TargetKind = "recovery"
	// TargetReconcile runs reconciliation again over the failed run's window (Body holds the
	// run's input).
	TargetReconcile TargetKind = "reconcile"
	// TargetNone means there is nothing to retry automatically (a reconciliation difference).
	TargetNone TargetKind = ""
)

// Target is where a retry sends the work.
type Target struct {
	Kind      TargetKind      `json:"kind,omitempty"`
	Queue     string          `json:"queue,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
	PaymentID string          `json:"payment_id,omitempty"`
	Invoice   string          `json:"invoice,omitempty"`
	// Retry is the number of the retry a Requeue carries out (1 for the first); it is set on
	// the copy handed to the Requeuer, never stored.
	Retry int `json:"-"`
	// RecordID is the record the retry belongs to; like Retry it is set only on the copy
	// handed to the Requeuer, so the consumer can close the record's loop.
	RecordID string `json:"-"`
}

// Retryable reports whether the target can be retried.
func (t Target) Retryable() bool {
	return t.Kind == TargetQueue || t.Kind == TargetRecovery || t.Kind == TargetReconcile
}

// Audit is one operator (or system) action on a record.
type Audit struct {
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Action  string    `json:"action"`
	Note    string    `json:"note,omitempty"`
	From    Status    `json:"from,omitempty"`
	To      Status    `json:"to,omitempty"`
	RetryID string    `json:"retry_id,omitempty"`
	Result  string    `json:"outcome,omitempty"`
}

// Audit actions.
const (
	ActionOpened     = "opened"
	ActionReopened   = "reopened"
	ActionRetry      = "retry"
	ActionRetryError = "retry_failed"
	ActionOverride   = "override"
	ActionResolve    = "resolve"
	ActionIgnore     = "ignore"
	// ActionRetrySucceeded closes a record whose retried work succeeded (Result says what it
	// did); ActionRetryFailedAgain reopens one whose retried work failed, with the try
	// appended. Both carry the retry id.
	ActionRetrySucceeded   = "retry_succeeded"
	ActionRetryFailedAgain = "retry_failed_again"
)

// Record is one piece of dead work an operator can act on.
type Record struct {
	ID     string `json:"id"`
	Source Source `json:"source"`
	// Key is the source's own key for the work (provider and event id, payment id, message
	// id); the record id derives from it.
	Key   string `json:"key"`
	Cause Cause  `json:"class"`
	// Facts are the safe details the plain-language texts are written from.
	Facts Facts `json:"facts"`
	// Payload is the full original message or evidence.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PaymentID, EventID and IdempotencyKey link the record to the attempt log.
	PaymentID      string `json:"payment_id,omitempty"`
	EventID        string `json:"event_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`

	Tries           []Try  `json:"attempts"`
	Explanation     string `json:"explanation"`
	SuggestedAction string `json:"suggested_action"`
	Status          Status `json:"status"`
	Target          Target `json:"target"`
	// Retries counts retries started; the next retry's id derives from it.
	Retries int `json:"retries"`
	// Result is the manual result an override recorded (the API's "outcome").
	Result    string    `json:"outcome,omitempty"`
	Audit     []Audit   `json:"audit"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version is the optimistic-concurrency counter every action conditions on.
	Version int64 `json:"version"`
}

// RecordID is the record id for a source's key: the same dead work always names the same
// record, so opening it twice is one record.
func RecordID(source Source, key string) string {
	return "dl_" + digest("record", string(source), key)[:24]
}

// RetryID is the id of retry number n of a record. Two clicks on Retry for the same retry
// number carry the same id; a downstream consumer can dedupe on it.
func RetryID(recordID string, n int) string {
	return "rt_" + digest("retry", recordID, strconv.Itoa(n))[:24]
}

// digest hashes the parts with length prefixes, so ("a","bc") and ("ab","c") differ.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}
