// Package outboxlambda is the Lambda side of the outbox relay: the handler of the outbox-relay
// function, which the outbox table's DynamoDB stream invokes with new images and a schedule
// invokes to sweep what the stream could not deliver. It turns stream records into outbox
// messages in the DynamoDB store's item layout (shared/dynamo) and hands them to an
// outbox.Relay, so the outbox package itself takes plain messages and imports no Lambda event
// types.
//
//	h := &outboxlambda.Handler{Relay: &outbox.Relay{Store: st, Handlers: handlers}}
//	lambda.Start(h.Handle)
package outboxlambda

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// Attribute names of the DynamoDB store's item layout (shared/dynamo) that a stream record's
// new image carries.
const (
	attrPK      = "pk"
	attrDoc     = "doc"
	attrVersion = "ver"
	attrIndexPK = "gsi1pk"
)

// ErrBadImage means a stream record's image is not an outbox item.
var ErrBadImage = errors.New("outboxlambda: stream record is not an outbox item")

// Handler is the outbox-relay function's handler over Relay.
type Handler struct {
	Relay *outbox.Relay
	// Log receives the records not delivered (default: the relay's logger, else slog's default).
	Log *slog.Logger
}

func (h *Handler) log() *slog.Logger {
	switch {
	case h.Log != nil:
		return h.Log
	case h.Relay.Log != nil:
		return h.Relay.Log
	}
	return slog.Default()
}

// Stream is the relay function's handler for the outbox table's DynamoDB stream (new
// images). Each inserted or rewritten message is delivered and then deleted; the first failure
// stops the batch and is reported by its sequence number (ReportBatchItemFailures), so Lambda
// retries from there, bisects a failing batch (BisectBatchOnFunctionError), and after its
// retries sends the batch's description to the on-failure destination, which becomes a
// dead-letter record. The message itself is never deleted undelivered: it stays in the table.
// Removals (the relay's own deletes) and parked messages are skipped, and so is a timer not
// yet due (outbox.NewAt): it stays for the sweep, which delivers it once due.
func (h *Handler) Stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, rec := range ev.Records {
		if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
			continue
		}
		it, err := itemOf(rec.Change.NewImage)
		if err == nil && it.IndexPK == "" {
			continue // parked as unreadable by a relay: a person looks at it
		}
		var m outbox.Message
		if err == nil {
			m, err = outbox.Decode(it)
		}
		if err == nil && m.Waiting(h.now()) {
			continue
		}
		if err == nil {
			err = h.Relay.Deliver(ctx, m, it.Version)
		}
		if err != nil {
			h.log().ErrorContext(ctx, "outbox stream record not delivered", "sequence", rec.Change.SequenceNumber, "error", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			return resp, nil
		}
	}
	return resp, nil
}

func (h *Handler) now() time.Time {
	if h.Relay.Now != nil {
		return h.Relay.Now()
	}
	return time.Now()
}

// Sweep is what the relay function answers to a scheduled invocation.
type Sweep struct {
	Delivered int `json:"delivered"`
	Failed    int `json:"failed"`
}

// Handle is the relay function's handler: a DynamoDB stream batch goes to Stream; any other
// invocation (the schedule) drains the messages the stream could not deliver (Relay.Drain, with
// its MinAge), because a stream keeps records for 24 hours and Lambda's retries end: the message
// left in the table is delivered by the sweep, however long the target was down.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var ev events.DynamoDBEvent
	if json.Unmarshal(raw, &ev) == nil && len(ev.Records) > 0 && ev.Records[0].EventSource == "aws:dynamodb" {
		return h.Stream(ctx, ev)
	}
	d, f, err := h.Relay.Drain(ctx)
	return Sweep{Delivered: d, Failed: f}, err
}

func itemOf(img map[string]events.DynamoDBAttributeValue) (store.Item, error) {
	pk, ok := img[attrPK]
	doc, ok2 := img[attrDoc]
	if !ok || !ok2 || pk.DataType() != events.DataTypeString || doc.DataType() != events.DataTypeBinary {
		return store.Item{}, ErrBadImage
	}
	it := store.Item{PK: pk.String(), Doc: doc.Binary()}
	if v, ok := img[attrVersion]; ok && v.DataType() == events.DataTypeNumber {
		n, err := strconv.ParseInt(v.Number(), 10, 64)
		if err != nil {
			return store.Item{}, ErrBadImage
		}
		it.Version = n
	}
	if x, ok := img[attrIndexPK]; ok && x.DataType() == events.DataTypeString {
		it.IndexPK = x.String()
	}
	return it, nil
}
