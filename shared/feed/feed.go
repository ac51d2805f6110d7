package feed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/store"
)

// Event is one published change: the schema of the feed's entries and of the EventBridge
// events' detail.
type Event struct {
	// ID names the change: the same change always has the same id (consumers may dedupe on it).
	ID string `json:"id"`
	// Type is "payment." + the payment's status after the change (payment.succeeded,
	// payment.refunded, ...).
	Type      string `json:"type"`
	PaymentID string `json:"payment_id"`
	// Sequence is the payment's change number: 1 for its first published change, then +1.
	Sequence int64 `json:"sequence"`
	// Version orders the change against every other writer's view (payments.Payment.Version).
	Version int64     `json:"version"`
	At      time.Time `json:"at"`
	// Payment is the API's view of the payment as this change left it.
	Payment payments.View `json:"payment"`
	// Cursor is the entry's place in the local feed (GET /events?after=CURSOR); empty on
	// EventBridge.
	Cursor string `json:"cursor,omitempty"`
}

// Sink puts a numbered event out and commits the publication state with it: atomically for a
// store-backed log, after the put for a bus (a crash between them repeats the put with the
// same id and sequence).
type Sink interface {
	Publish(ctx context.Context, ev Event, state store.Write) error
}

// stateKey is the payment's publication state, kept in the payments table.
func stateKey(paymentID string) string { return "published#" + paymentID }

type state struct {
	Version  int64 `json:"version"`
	Sequence int64 `json:"sequence"`
	// Digest is the SHA-256 of the last published payment view: a newer write that leaves the
	// view as it was (our own record of a state a webhook already stored) is no change.
	Digest string `json:"digest"`
}

func digest(v payments.View) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Publisher numbers changes and hands them to its Sink.
type Publisher struct {
	Store store.Store
	Sink  Sink
	Log   *slog.Logger
}

// ErrBadChange: an outbox message that is not a payments.Change.
var ErrBadChange = errors.New("feed: bad change message")

// Handlers returns the outbox handler of payments.KindPublishChange.
func (p *Publisher) Handlers() map[string]outbox.Handler {
	return map[string]outbox.Handler{payments.KindPublishChange: func(ctx context.Context, m outbox.Message) error {
		var c payments.Change
		if err := json.Unmarshal(m.Payload, &c); err != nil || c.PaymentID == "" {
			return fmt.Errorf("%w: %s", ErrBadChange, m.ID)
		}
		return p.Publish(ctx, m.ID, c)
	}}
}

func (p *Publisher) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// Publish publishes change c (message id id) unless its version was published already or a
// newer one was.
func (p *Publisher) Publish(ctx context.Context, id string, c payments.Change) error {
	var st state
	it, err := p.Store.Get(ctx, payments.Table, stateKey(c.PaymentID), "")
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(it.Doc, &st); err != nil {
			return fmt.Errorf("feed: publication state of %s: %w", c.PaymentID, err)
		}
	}
	d := digest(c.Payment)
	switch {
	case c.Version < st.Version:
		p.log().InfoContext(ctx, "change superseded by a newer published one; not published", "id", id,
			"payment_id", c.PaymentID, "version", c.Version, "published_version", st.Version)
		return nil
	case c.Version == st.Version && d != st.Digest && st.Sequence > 0:
		// Each version of a payment is one committed write with one view; two views under one
		// version mean a writer announced a state it did not store. Loud, never silent.
		p.log().ErrorContext(ctx, "two changes of one payment share a version; the later one is not published", "id", id,
			"payment_id", c.PaymentID, "version", c.Version)
		return nil
	case c.Version == st.Version:
		return nil
	}
	cond := store.Cond{Kind: store.NotExists}
	if st.Sequence > 0 {
		cond = store.Cond{Kind: store.VersionIs, Version: st.Sequence}
	}
	if st.Sequence > 0 && d == st.Digest {
		// The same view again: no change to publish; the version moves so older ones stay out.
		doc, _ := json.Marshal(state{Version: c.Version, Sequence: st.Sequence, Digest: d})
		return p.Store.Put(ctx, payments.Table, store.Item{PK: stateKey(c.PaymentID), Doc: doc, Version: st.Sequence}, cond)
	}
	next := state{Version: c.Version, Sequence: st.Sequence + 1, Digest: d}
	doc, _ := json.Marshal(next)
	w := store.Write{Table: payments.Table, Put: &store.Item{PK: stateKey(c.PaymentID), Doc: doc, Version: next.Sequence}, Cond: cond}
	ev := Event{ID: id, Type: "payment." + c.Payment.Status, PaymentID: c.PaymentID, Sequence: next.Sequence,
		Version: c.Version, At: c.At, Payment: c.Payment}
	if err := p.Sink.Publish(ctx, ev, w); err != nil {
		return fmt.Errorf("feed: publish %s: %w", id, err)
	}
	p.log().InfoContext(ctx, "change published", "id", id, "payment_id", c.PaymentID, "sequence", next.Sequence, "type", ev.Type)
	return nil
}

// ParseCursor reads a feed cursor ("" is the start).
func ParseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 20 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("feed: cursor %q is not a position", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("feed: cursor %q is not a position", s)
	}
	return n, nil
}
