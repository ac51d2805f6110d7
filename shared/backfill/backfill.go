package backfill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

// Defaults.
const (
	// DefaultLookback is how far back a first run (no checkpoint) lists undelivered events:
	// Stripe keeps events for 30 days.
	DefaultLookback = 29 * 24 * time.Hour
	// DefaultOverlap re-lists this much before the checkpoint: an event created in the last
	// second before a pass may be listed only after it.
	DefaultOverlap = 5 * time.Minute
	// MaxEvents bounds one pass; a longer backlog continues from the checkpoint next pass.
	MaxEvents = 50000
)

// checkpointKey is the checkpoint's item in the worker's table (worker.Table).
const checkpointKey = "backfill#checkpoint#stripe"

// Applier is the webhook worker's Apply.
type Applier interface {
	Apply(ctx context.Context, d webhooks.Delivery) (worker.Outcome, error)
}

// Backfill runs passes. Store, Events and Worker are required.
type Backfill struct {
	Store  store.Store
	Events provider.EventLister
	Worker Applier
	// Requeue, when true, hands an event the worker could not apply now (its payment not stored
	// yet, a store error) to the webhook queue through the outbox (KindRequeue, delivered by
	// FollowOns in the relay): the queue's retries and dead-letter queue close its loop, and the
	// pass itself calls no queue. Without it, the pass stops its checkpoint before that event.
	Requeue bool
	Now     func() time.Time
	Log     *slog.Logger
	// Lookback and Overlap default to DefaultLookback and DefaultOverlap.
	Lookback, Overlap time.Duration

	mu sync.Mutex
}

// Request is an on-demand pass: {"since":RFC3339} lists every event from then (instead of
// from the checkpoint); {"undelivered_only":true} keeps only those the provider could not
// deliver. An empty request is the scheduled pass.
type Request struct {
	Since           string `json:"since,omitempty"`
	UndeliveredOnly bool   `json:"undelivered_only,omitempty"`
}

// ErrBadRequest: a Request that does not parse or names a time out of range.
var ErrBadRequest = errors.New("backfill: bad request")

// ParseRequest reads a Request (empty, {} or null: the scheduled pass); unknown fields are
// rejected.
func ParseRequest(raw []byte) (Request, error) {
	var r Request
	if len(raw) == 0 || string(raw) == "null" {
		return r, nil
	}
	if len(raw) > 4<<10 {
		return r, fmt.Errorf("%w: larger than 4 KiB", ErrBadRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("%w: trailing data", ErrBadRequest)
	}
	if r.Since != "" {
		if _, err := time.Parse(time.RFC3339, r.Since); err != nil {
			return Request{}, fmt.Errorf("%w: since is not an RFC 3339 time", ErrBadRequest)
		}
	}
	return r, nil
}

// Report is what one pass did.
type Report struct {
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Undelivered bool      `json:"undelivered_only"`
	Listed      int       `json:"listed"`
	// Outcomes counts the worker's outcome per event: applied (a change that was missing),
	// duplicate, stale, recorded; requeued counts those handed to the webhook queue.
	Outcomes map[worker.Outcome]int `json:"outcomes"`
	Requeued int                    `json:"requeued"`
	// Applied lists the events that changed a payment (the lost deliveries that mattered).
	Applied []string `json:"applied"`
	// Checkpoint is where the next scheduled pass starts (before the overlap).
	Checkpoint time.Time `json:"checkpoint"`
	More       bool      `json:"more,omitempty"`
}

type checkpoint struct {
	Through time.Time `json:"through"`
}

func (b *Backfill) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Backfill) log() *slog.Logger {
	if b.Log != nil {
		return b.Log
	}
	return slog.Default()
}

// Checkpoint reads where the scheduled pass stands (zero: never ran).
func (b *Backfill) Checkpoint(ctx context.Context) (time.Time, error) {
	it, err := b.Store.Get(ctx, worker.Table, checkpointKey, "")
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var c checkpoint
	if err := json.Unmarshal(it.Doc, &c); err != nil {
		return time.Time{}, fmt.Errorf("backfill: checkpoint: %w", err)
	}
	return c.Through, nil
}

// Run makes one pass. The checkpoint moves only on a scheduled pass (no Since), and only up
// to the oldest event that could be neither applied nor requeued.
func (b *Backfill) Run(ctx context.Context, req Request) (Report, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lookback, overlap := b.Lookback, b.Overlap
	if lookback <= 0 {
		lookback = DefaultLookback
	}
	if overlap <= 0 {
		overlap = DefaultOverlap
	}
	now := b.now().UTC().Truncate(time.Second)
	rep := Report{To: now, Outcomes: map[worker.Outcome]int{}, Applied: []string{}, Undelivered: req.UndeliveredOnly}
	scheduled := req.Since == ""
	if !scheduled {
		since, err := time.Parse(time.RFC3339, req.Since)
		if err != nil {
			return rep, fmt.Errorf("%w: since", ErrBadRequest)
		}
		rep.From = since.UTC()
	} else {
		cp, err := b.Checkpoint(ctx)
		if err != nil {
			return rep, err
		}
		if cp.IsZero() {
			rep.From, rep.Undelivered = now.Add(-lookback), true
		} else {
			rep.From = cp.Add(-overlap)
		}
	}
	if rep.From.Before(now.Add(-lookback)) {
		rep.From = now.Add(-lookback)
	}
	var evs []provider.Event
	for ev, err := range b.Events.Events(ctx, provider.EventQuery{CreatedFrom: rep.From, CreatedTo: now, Undelivered: rep.Undelivered}) {
		if err != nil {
			return rep, fmt.Errorf("backfill: list events: %w", err)
		}
		evs = append(evs, ev)
		if len(evs) == MaxEvents {
			rep.More = true
			break
		}
	}
	rep.Listed = len(evs)
	// Oldest first, as they happened (the provider lists newest first).
	slices.SortStableFunc(evs, func(a, b provider.Event) int { return a.Created.Compare(b.Created) })
	through := now
	if rep.More && len(evs) > 0 {
		through = evs[len(evs)-1].Created
	}
	for _, ev := range evs {
		d := webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: ev.ID, Body: ev.Body, ReceivedAt: b.now().UTC()}
		out, err := b.Worker.Apply(ctx, d)
		if err == nil {
			rep.Outcomes[out]++
			if out == worker.Applied {
				rep.Applied = append(rep.Applied, ev.ID)
				b.log().InfoContext(ctx, "backfill applied a missed event", "event_id", ev.ID, "type", ev.Type)
			}
			continue
		}
		if b.Requeue && !errors.Is(err, webhooks.ErrBadPayload) {
			qerr := b.requeue(ctx, d)
			if qerr == nil {
				rep.Requeued++
				b.log().InfoContext(ctx, "backfill handed an event to the webhook queue through the outbox", "event_id", ev.ID, "error", err)
				continue
			}
			err = errors.Join(err, qerr)
		}
		b.log().WarnContext(ctx, "backfill could not apply an event; the checkpoint stays before it", "event_id", ev.ID, "error", err)
		if ev.Created.Before(through) {
			through = ev.Created
		}
	}
	rep.Checkpoint = through
	if scheduled {
		doc, _ := json.Marshal(checkpoint{Through: through})
		if err := b.Store.Put(ctx, worker.Table, store.Item{PK: checkpointKey, Doc: doc}, store.Cond{}); err != nil {
			return rep, fmt.Errorf("backfill: store checkpoint: %w", err)
		}
	}
	b.log().InfoContext(ctx, "backfill pass done", "from", rep.From, "to", rep.To, "listed", rep.Listed,
		"applied", rep.Outcomes[worker.Applied], "requeued", rep.Requeued, "checkpoint", through)
	return rep, nil
}

// requeue puts d in the outbox under a deterministic id (RequeueID). There is no transaction
// to join: the worker's Apply failed and committed nothing, and the checkpoint is one write at
// the end of the pass for all its events (a pass may requeue far more than a transaction
// holds). So this is a single conditional put, made before the checkpoint moves past the
// event: a crash after it leaves a message the relay delivers; a crash before it leaves the
// checkpoint behind the event, and the next pass lists it again. A message already pending
// under that id (an earlier pass's, still being retried) is the same follow-on: kept, not
// overwritten, and the event counts as requeued.
func (b *Backfill) requeue(ctx context.Context, d webhooks.Delivery) error {
	w, err := outbox.New(KindRequeue, RequeueID(d.EventID), d, b.now())
	if err != nil {
		return err
	}
	err = b.Store.Put(ctx, w.Table, *w.Put, store.Cond{Kind: store.NotExists})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	return err
}

// Input is what a function that runs both the backfill and another pass receives: an input
// with "backfill" is a backfill pass ({"backfill":{}} from its schedule, or an on-demand
// Request); any other input goes to the other pass.
type Input struct {
	Backfill *Request `json:"backfill"`
}

// Handler returns a Lambda handler that runs a backfill pass for a {"backfill":...} input and
// hands every other input to next (the reconciler's Handle), so one function with one
// reserved instance holds both schedules and the checkpoint has one writer.
func (b *Backfill) Handler(next func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in map[string]json.RawMessage
		if json.Unmarshal(raw, &in) != nil || in["backfill"] == nil {
			return next(ctx, raw)
		}
		if len(in) != 1 {
			return nil, fmt.Errorf("%w: backfill goes alone", ErrBadRequest)
		}
		req, err := ParseRequest(in["backfill"])
		if err != nil {
			return nil, err
		}
		return b.Run(ctx, req)
	}
}
