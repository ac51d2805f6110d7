package stripesim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Buckets of providersim.db. Ids are fixed-width base62 of a per-bucket sequence, so a
// bucket's key order is creation order.
var (
	bucketPIs      = []byte("payment_intents")
	bucketPIByTime = []byte("payment_intents_by_created") // be64(created) + id -> nothing
	bucketIdem     = []byte("idempotency_keys")
	bucketCharges  = []byte("charges")
	bucketRefunds  = []byte("refunds")
	bucketEvents   = []byte("events")       // id -> the event JSON as sent, never rewritten
	bucketEvState  = []byte("event_states") // id -> storedEvent: delivery state
	bucketOutbox   = []byte("outbox")       // be64(seq) -> delivery
	bucketCards    = []byte("cards")
	bucketMeta     = []byte("meta")
	allBuckets     = [][]byte{bucketPIs, bucketPIByTime, bucketIdem, bucketCharges, bucketRefunds,
		bucketEvents, bucketEvState, bucketOutbox, bucketCards, bucketMeta}
)

var (
	metaDropWebhooks = []byte("drop_webhooks")
	metaPaused       = []byte("webhooks_paused")
)

// counted is the buckets whose keys are counted in meta, under "count_" + the bucket's name,
// in the same transaction as each key added or deleted: they grow with every payment, and
// Bucket.Stats counts a bucket by reading every page of it. GET /_sim/stats is polled by
// whatever waits for the simulator to settle (the tests, the bench, the chaos harness); with a
// walk, each poll cost about 100 ms and put the whole file into the process's resident memory.
var counted = [][]byte{bucketPIs, bucketEvents}

func countKey(b []byte) []byte { return append([]byte("count_"), b...) }

// count is the number of keys in the counted bucket b.
func count(tx *bolt.Tx, b []byte) int {
	v := bucket(tx, bucketMeta).Get(countKey(b))
	if len(v) != 8 {
		return 0
	}
	return int(be64u(v))
}

// addCount adds d to the count of the counted bucket b.
func addCount(tx *bolt.Tx, b []byte, d int) error {
	return bucket(tx, bucketMeta).Put(countKey(b), be64(uint64(count(tx, b)+d)))
}

// initCounts counts the counted buckets that have no count yet: every one in a new file,
// and in a file written before the counts were kept, by one walk when it is first opened.
func initCounts(tx *bolt.Tx) error {
	for _, b := range counted {
		if bucket(tx, bucketMeta).Get(countKey(b)) != nil {
			continue
		}
		if err := bucket(tx, bucketMeta).Put(countKey(b), be64(uint64(bucket(tx, b).Stats().KeyN))); err != nil {
			return err
		}
	}
	return nil
}

// appendOnly buckets get keys in increasing order, so their pages are packed full
// instead of bbolt's default half (the file is about half the size).
var appendOnly = map[string]bool{string(bucketPIs): true, string(bucketPIByTime): true, string(bucketCharges): true,
	string(bucketRefunds): true, string(bucketEvents): true, string(bucketEvState): true, string(bucketOutbox): true}

// bucket opens one of allBuckets (created by New) with its fill percent.
func bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	if appendOnly[string(name)] {
		b.FillPercent = 0.95
	}
	return b
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID is prefix + the next sequence of b in 16 base62 digits.
func newID(b *bolt.Bucket, prefix string) (string, error) {
	n, err := b.NextSequence()
	if err != nil {
		return "", fmt.Errorf("stripesim: sequence: %w", err)
	}
	var buf [16]byte
	for i := len(buf) - 1; i >= 0; i-- {
		buf[i] = base62[n%62]
		n /= 62
	}
	return prefix + string(buf[:]), nil
}

func be64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func timeKey(created int64, id string) []byte {
	// Offset so negative times still sort before positive ones.
	return append(be64(uint64(created)^(1<<63)), id...)
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("stripesim: decode %s: %w", key, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("stripesim: encode %s: %w", key, err)
	}
	return b.Put(key, raw)
}

// idemRecord is a saved response for an idempotency key.
type idemRecord struct {
	Fingerprint [32]byte
	Status      int
	Body        []byte
	RequestID   string
	CreatedAt   int64 // unix nanoseconds
}

// errCorrupt reports a stored record that does not decode.
var errCorrupt = errors.New("stripesim: corrupt record")

// idemRecord encoding: status u16, created i64, fingerprint [32], len(request id) u8,
// request id, body. Binary because the body is most of it and JSON would base64 it.
func (r idemRecord) marshal() []byte {
	id := r.RequestID[:min(len(r.RequestID), 255)]
	b := make([]byte, 0, 2+8+32+1+len(id)+len(r.Body))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Status))
	b = binary.BigEndian.AppendUint64(b, uint64(r.CreatedAt))
	b = append(b, r.Fingerprint[:]...)
	b = append(b, byte(len(id)))
	b = append(b, id...)
	return append(b, r.Body...)
}

func (r *idemRecord) unmarshal(b []byte) error {
	if len(b) < 43 {
		return errCorrupt
	}
	r.Status = int(binary.BigEndian.Uint16(b))
	r.CreatedAt = int64(binary.BigEndian.Uint64(b[2:]))
	copy(r.Fingerprint[:], b[10:42])
	n := int(b[42])
	if len(b) < 43+n {
		return errCorrupt
	}
	r.RequestID = string(b[43 : 43+n])
	r.Body = bytes.Clone(b[43+n:])
	return nil
}

// getIdem reads the record for a scoped key.
func getIdem(tx *bolt.Tx, key []byte) (idemRecord, bool, error) {
	var r idemRecord
	raw := bucket(tx, bucketIdem).Get(key)
	if raw == nil {
		return r, false, nil
	}
	return r, true, r.unmarshal(raw)
}

// charge is the minimal Charge record kept for refunds and events.
type charge struct {
	ID                   string        `json:"id"`
	Object               string        `json:"object"`
	Amount               int64         `json:"amount"`
	AmountCaptured       int64         `json:"amount_captured"`
	AmountRefunded       int64         `json:"amount_refunded"`
	Captured             bool          `json:"captured"`
	Created              int64         `json:"created"`
	Currency             string        `json:"currency"`
	Customer             *string       `json:"customer"`
	Livemode             bool          `json:"livemode"`
	Paid                 bool          `json:"paid"`
	PaymentIntent        string        `json:"payment_intent"`
	PaymentMethod        string        `json:"payment_method"`
	Refunded             bool          `json:"refunded"`
	Status               string        `json:"status"`
	FailureCode          *string       `json:"failure_code"`
	FailureMessage       *string       `json:"failure_message"`
	Outcome              chargeOutcome `json:"outcome"`
	PaymentMethodDetails struct {
		Type string `json:"type"`
		Card struct {
			Brand string `json:"brand"`
			Last4 string `json:"last4"`
			// Fingerprint names the card number (the same for every PaymentMethod of it).
			Fingerprint string `json:"fingerprint"`
			Funding     string `json:"funding"`
			Network     string `json:"network"`
			// CaptureBefore is when an uncaptured authorization lapses (manual capture).
			CaptureBefore int64 `json:"capture_before,omitempty"`
		} `json:"card"`
	} `json:"payment_method_details"`
}

// chargeOutcome is Stripe's charge.outcome, where the advice codes of a decline live
// in stripe-go's types (its Error type has no advice_code fields).
type chargeOutcome struct {
	AdviceCode         *string `json:"advice_code"`
	NetworkAdviceCode  *string `json:"network_advice_code"`
	NetworkDeclineCode *string `json:"network_decline_code"`
	NetworkStatus      string  `json:"network_status"`
	Reason             *string `json:"reason"`
	RiskLevel          string  `json:"risk_level"`
	RiskScore          int64   `json:"risk_score"`
	SellerMessage      string  `json:"seller_message"`
	Type               string  `json:"type"`
}

// refund is Stripe's Refund object.
type refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
	FailureReason *string           `json:"failure_reason,omitempty"`
}

// Delivery states of an event, as shown by GET /_sim/events.
const (
	DeliveryPending    = "pending"    // queued in the outbox, not yet acknowledged
	DeliveryDelivered  = "delivered"  // acknowledged with a 2xx at least once
	DeliveryFailed     = "failed"     // retries exhausted (the retry horizon passed)
	DeliveryDropped    = "dropped"    // dropped on purpose (POST /_sim/webhooks/drop)
	DeliverySuppressed = "suppressed" // created through a control that sends no webhook
	DeliveryDisabled   = "disabled"   // the simulator has no webhook URL
)

// storedEvent is what is known about an event's deliveries; the event itself is in
// bucketEvents, so a delivery rewrites only this small record.
type storedEvent struct {
	Type        string `json:"type"`
	ObjectID    string `json:"object_id"`
	Created     int64  `json:"created"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	Deliveries  int    `json:"deliveries"`
	LastStatus  int    `json:"last_status,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	DeliveredAt int64  `json:"delivered_at,omitempty"`
}

// delivery is one outbox entry: events sent in order, resuming at Pos after a failure.
type delivery struct {
	EventIDs  []string `json:"event_ids"`
	Pos       int      `json:"pos"`
	Attempts  int      `json:"attempts"`
	NextAt    int64    `json:"next_at"`    // unix nanoseconds
	CreatedAt int64    `json:"created_at"` // unix nanoseconds
	Replay    bool     `json:"replay,omitempty"`
}
