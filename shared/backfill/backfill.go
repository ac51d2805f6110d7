package backfill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/metrics"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

// Defaults.
const (
	// DefaultLookback is how far back a first run (no checkpoint) lists undelivered events:
	// Stripe keeps events for 30 days.
	DefaultLookback = 29 * 24 * time.Hour
	// DefaultOverlap re-lists this much before the checkpoint: the event list is eventually
	// consistent, so an event created just before a window closed may be listed only after
	// the walk went past it. The next window starts this much earlier and lists it again
	// (the Applier's dedupe makes the repeats harmless).
	DefaultOverlap = 5 * time.Minute
	// MaxEvents bounds one pass; a longer backlog continues from the cursor next pass.
	MaxEvents = 50000
	// DefaultPageSize is how many events a pass handles between two cursor commits (Stripe's
	// largest list page): a crash loses at most this much work. A pass that runs short of
	// time commits where it stops, whatever the page.
	DefaultPageSize = 100
	// DefaultReserve is the most time a pass leaves of its invocation (the Lambda context's
	// deadline; a sixth of what it has when that is less): it commits and hands over when
	// less than this remains.
	DefaultReserve = 45 * time.Second
)

// checkpointKey is the checkpoint's item in the applied events' table (payments.EventsTable).
const checkpointKey = "backfill#checkpoint#stripe"

// Applier applies one provider event (payments.Applier.Apply: the path a webhook delivery's
// event takes).
type Applier interface {
	Apply(ctx context.Context, ev webhooks.Event) (payments.Effect, error)
}

// Backfill runs passes. Store, Events and Applier are required.
//
// A scheduled pass walks a window of the provider's event log oldest first with the list's
// cursor (Stripe's ending_before), and commits the cursor after every page it handled, so a
// backlog larger than one pass, one invocation or one process is walked completely: the next
// pass continues at the next page, a crash repeats at most one page (the Applier's dedupe
// makes that harmless), and no event is skipped. An event that cannot be applied now goes to
// the webhook queue through the outbox (KindRequeue, delivered by FollowOns in the relay):
// the queue's retries and dead-letter queue close its loop, and the pass calls no queue.
type Backfill struct {
	Store   store.Store
	Events  provider.EventLister
	Applier Applier
	Now     func() time.Time
	Log     *slog.Logger
	// Metrics, when set, receives each pass's backlog age (BacklogAgeMetric).
	Metrics *metrics.EMF
	// Lookback and Overlap default to DefaultLookback and DefaultOverlap; PageSize to
	// DefaultPageSize; Reserve to DefaultReserve (or a sixth of the time the invocation
	// has, when that is less); MaxEvents to MaxEvents.
	Lookback, Overlap time.Duration
	PageSize          int
	Reserve           time.Duration
	MaxEvents         int
	// TimeLeft says how long the invocation has left (default: the context's deadline; no
	// deadline, no bound). Tests give it a fake.
	TimeLeft func(ctx context.Context) (time.Duration, bool)

	mu sync.Mutex
}

// BacklogAgeMetric is the age, in seconds, of the oldest event a scheduled pass has not yet
// walked past (0 when the log is walked up to the pass's start): it grows while the backfill
// falls behind, and an alarm watches it.
const BacklogAgeMetric = "BackfillBacklogAge"

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
	// From and To are the window being walked (a window may take several passes).
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Undelivered bool      `json:"undelivered_only"`
	// Listed counts the events this pass handled; Pages the cursor commits it made.
	Listed int `json:"listed"`
	Pages  int `json:"pages"`
	// Outcomes counts the Applier's outcome per event: applied (a change that was missing),
	// duplicate, stale, recorded; requeued counts those handed to the webhook queue.
	Outcomes map[payments.Effect]int `json:"outcomes"`
	Requeued int                     `json:"requeued"`
	// Applied lists the events that changed a payment (the lost deliveries that mattered).
	Applied []string `json:"applied"`
	// Checkpoint is how far the log is walked completely: the next window starts there
	// (less the overlap). Cursor is the last event handled in the window still being walked.
	Checkpoint time.Time `json:"checkpoint"`
	Cursor     string    `json:"cursor,omitempty"`
	// More says the window is not walked completely yet (Stopped says why: "deadline",
	// "limit" or "stalled"); the next pass continues at the cursor.
	More    bool   `json:"more,omitempty"`
	Stopped string `json:"stopped,omitempty"`
	// Stalled is an event that could be neither applied nor handed to the queue: the pass
	// stopped before it, and the next one starts with it.
	Stalled string `json:"stalled,omitempty"`
	// BacklogAge is how old the oldest event not yet walked past may be, in seconds.
	BacklogAge float64 `json:"backlog_age_s"`
	// ReconciliationOnly is a stretch of time the event log no longer covers (older than the
	// provider keeps events): what happened then is found by reconciliation alone.
	ReconciliationOnly *Gap `json:"reconciliation_only,omitempty"`
}

// Gap is a stretch of time the backfill cannot walk.
type Gap struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Reason string    `json:"reason"`
}

// checkpoint is the durable state of the scheduled walk.
type checkpoint struct {
	// Through: every window up to here is walked completely.
	Through time.Time `json:"through"`
	// Window is the window being walked, if one is.
	Window *window `json:"window,omitempty"`
}

// window is one walk of the log from From to To, oldest first.
type window struct {
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Undelivered bool      `json:"undelivered,omitempty"`
	// After is the walk's cursor: the last event handled (or an event just before From, the
	// anchor the walk starts after). "" until the walk has a place to start.
	After string `json:"after,omitempty"`
	// At is when the After event was created (the walk's position in time).
	At time.Time `json:"at"`
	// Seek is set while looking for the window's oldest event when no event precedes the
	// window (nothing to anchor on): the walk lists newest first from Seek downwards.
	Seek string `json:"seek,omitempty"`
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

func (b *Backfill) timeLeft(ctx context.Context) (time.Duration, bool) {
	if b.TimeLeft != nil {
		return b.TimeLeft(ctx)
	}
	d, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(d), true
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (b *Backfill) readCheckpoint(ctx context.Context) (checkpoint, error) {
	it, err := b.Store.Get(ctx, payments.EventsTable, checkpointKey, "")
	if errors.Is(err, store.ErrNotFound) {
		return checkpoint{}, nil
	}
	if err != nil {
		return checkpoint{}, err
	}
	var c checkpoint
	if err := json.Unmarshal(it.Doc, &c); err != nil {
		return checkpoint{}, fmt.Errorf("backfill: checkpoint: %w", err)
	}
	return c, nil
}

// Checkpoint reads how far the scheduled walk has covered the log completely (zero: never).
func (b *Backfill) Checkpoint(ctx context.Context) (time.Time, error) {
	c, err := b.readCheckpoint(ctx)
	return c.Through, err
}

// errStop ends a walk early; the report says why.
var errStop = errors.New("backfill: stop")

// Run makes one pass. A scheduled pass (no Since) continues the durable walk; an on-demand
// pass walks its own window from Since once, as far as one pass goes, and moves no checkpoint.
func (b *Backfill) Run(ctx context.Context, req Request) (Report, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lookback, overlap := orDefault(b.Lookback, DefaultLookback), orDefault(b.Overlap, DefaultOverlap)
	now := b.now().UTC().Truncate(time.Second)
	rep := Report{Outcomes: map[payments.Effect]int{}, Applied: []string{}}
	scheduled := req.Since == ""
	var cp checkpoint
	if scheduled {
		var err error
		if cp, err = b.readCheckpoint(ctx); err != nil {
			return rep, err
		}
	}
	w := cp.Window
	if w == nil {
		w = &window{To: now}
		switch {
		case !scheduled:
			since, err := time.Parse(time.RFC3339, req.Since)
			if err != nil {
				return rep, fmt.Errorf("%w: since", ErrBadRequest)
			}
			w.From, w.Undelivered = since.UTC(), req.UndeliveredOnly
		case cp.Through.IsZero():
			// A first run: what the provider could not deliver, as far back as it keeps.
			w.From, w.Undelivered = now.Add(-lookback), true
		default:
			w.From = cp.Through.Add(-overlap)
		}
		if oldest := now.Add(-lookback); w.From.Before(oldest) {
			if scheduled && !cp.Through.IsZero() {
				rep.ReconciliationOnly = &Gap{From: cp.Through, To: oldest,
					Reason: "The provider no longer lists events this old; reconciliation alone covers this time."}
				b.log().WarnContext(ctx, "backfill gap older than the provider keeps events", "from", cp.Through, "to", oldest)
			}
			w.From = oldest
		}
		w.At = w.From
	}
	rep.From, rep.To, rep.Undelivered = w.From, w.To, w.Undelivered
	reserve := b.Reserve
	if reserve <= 0 {
		// A sixth of what the invocation has, at most DefaultReserve: a short HTTP request's
		// deadline (the local stack's on-demand pass) still leaves room to walk.
		reserve = DefaultReserve
		if left, ok := b.timeLeft(ctx); ok {
			reserve = min(reserve, left/6)
		}
	}
	wk := &walk{b: b, ctx: ctx, rep: &rep, w: w, scheduled: scheduled, cp: &cp, reserve: reserve,
		pageSize: orDefault(b.PageSize, DefaultPageSize), max: orDefault(b.MaxEvents, MaxEvents)}
	err := wk.run()
	rep.Checkpoint, rep.Cursor = cp.Through, w.After
	if rep.More {
		rep.BacklogAge = now.Sub(w.At).Seconds()
	} else {
		rep.Cursor = ""
	}
	if scheduled {
		b.Metrics.Put(b.now(), nil, map[string]any{"cursor": rep.Cursor, "stopped": rep.Stopped},
			metrics.Value{Name: BacklogAgeMetric, Unit: metrics.Seconds, V: rep.BacklogAge})
	}
	if err != nil && !errors.Is(err, errStop) {
		return rep, err
	}
	b.log().InfoContext(ctx, "backfill pass done", "from", rep.From, "to", rep.To, "listed", rep.Listed,
		"applied", rep.Outcomes[payments.Applied], "requeued", rep.Requeued, "checkpoint", rep.Checkpoint,
		"more", rep.More, "stopped", rep.Stopped, "backlog_age_s", rep.BacklogAge)
	return rep, nil
}

// walk is one pass's walk of its window.
type walk struct {
	b         *Backfill
	ctx       context.Context
	rep       *Report
	w         *window
	cp        *checkpoint
	scheduled bool
	pageSize  int
	reserve   time.Duration
	max       int
	inPage    int
}

func (k *walk) query() provider.EventQuery {
	return provider.EventQuery{CreatedFrom: k.w.From, CreatedTo: k.w.To, Undelivered: k.w.Undelivered}
}

func (k *walk) run() error {
	if k.w.After == "" {
		first, found, err := k.start()
		if err != nil || !found {
			if err == nil {
				return k.complete() // nothing in the window
			}
			return err
		}
		if first.ID != "" {
			if err := k.handle(first); err != nil {
				return err
			}
		}
	}
	q := k.query()
	q.After = k.w.After
	for ev, err := range k.b.Events.Events(k.ctx, q) {
		if err != nil {
			return errors.Join(fmt.Errorf("backfill: list events: %w", err), k.save())
		}
		if err := k.handle(ev); err != nil {
			return err
		}
	}
	return k.complete()
}

// start finds where the walk begins: after the newest event created before the window (one
// list call), or, when there is none, at the window's oldest event, found by listing the
// window newest first (its progress committed page by page like the walk's). It returns the
// oldest event to handle first (none when the walk starts after an anchor) and whether the
// window has anything in it.
func (k *walk) start() (provider.Event, bool, error) {
	if k.w.Seek == "" {
		for ev, err := range k.b.Events.Events(k.ctx, provider.EventQuery{CreatedTo: k.w.From.Add(-time.Second)}) {
			if err != nil {
				return provider.Event{}, false, fmt.Errorf("backfill: find the walk's anchor: %w", err)
			}
			k.w.After, k.w.At = ev.ID, k.w.From
			return provider.Event{}, true, nil
		}
	}
	var oldest provider.Event
	q := k.query()
	q.Before = k.w.Seek
	n := 0
	for ev, err := range k.b.Events.Events(k.ctx, q) {
		if err != nil {
			return provider.Event{}, false, errors.Join(fmt.Errorf("backfill: list events: %w", err), k.save())
		}
		if oldest.ID != "" && n%k.pageSize == 0 {
			// Commit the second oldest seen, so the next pass lists the oldest again.
			k.w.Seek = oldest.ID
			if err := k.save(); err != nil {
				return provider.Event{}, false, err
			}
			if err := k.budget(); err != nil {
				return provider.Event{}, false, err
			}
		}
		oldest = ev
		n++
	}
	if oldest.ID == "" {
		if k.w.Seek != "" {
			// The event the seek stood on is gone (the provider's retention): look again.
			k.w.Seek = ""
			return k.start()
		}
		return provider.Event{}, false, nil
	}
	k.w.Seek = ""
	return oldest, true, nil
}

// handle hands one event to the Applier (or the webhook queue), moves the cursor past it and,
// at the end of a page, commits the cursor and checks the pass's bounds.
func (k *walk) handle(ev provider.Event) error {
	rep := k.rep
	d := webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: ev.ID, Body: ev.Body, ReceivedAt: k.b.now().UTC()}
	out, err := k.apply(d)
	switch {
	case err == nil:
		rep.Outcomes[out]++
		if out == payments.Applied {
			rep.Applied = append(rep.Applied, ev.ID)
			k.b.log().InfoContext(k.ctx, "backfill applied a missed event", "event_id", ev.ID, "type", ev.Type)
		}
	case errors.Is(err, webhooks.ErrBadPayload):
		// No retry can change a body that does not decode: recorded, and walked past.
		k.b.log().WarnContext(k.ctx, "backfill skipped an event it cannot decode", "event_id", ev.ID, "error", err)
	default:
		if qerr := k.b.requeue(k.ctx, d); qerr != nil {
			rep.Stalled, rep.More, rep.Stopped = ev.ID, true, "stalled"
			k.b.log().WarnContext(k.ctx, "backfill could not apply or requeue an event; the next pass starts with it",
				"event_id", ev.ID, "error", errors.Join(err, qerr))
			return errors.Join(errStop, k.save())
		}
		rep.Requeued++
		k.b.log().InfoContext(k.ctx, "backfill handed an event to the webhook queue through the outbox", "event_id", ev.ID, "error", err)
	}
	k.w.After, k.w.At = ev.ID, ev.Created
	rep.Listed++
	k.inPage++
	// The time left is read after every event, not once a page: under throttling a page can
	// take longer than the reserve (each throttled call backs off before it is tried again),
	// and a pass cut off mid-page would lose the page, and the next pass the same page again.
	short := k.short()
	if k.inPage < k.pageSize && rep.Listed < k.max && !short {
		return nil
	}
	k.inPage = 0
	if err := k.save(); err != nil {
		return err
	}
	rep.Pages++
	switch {
	case rep.Listed >= k.max:
		rep.More, rep.Stopped = true, "limit"
		return errStop
	case short:
		rep.More, rep.Stopped = true, "deadline"
		return errStop
	}
	return nil
}

// apply decodes d as the worker decodes a delivery and applies its event.
func (k *walk) apply(d webhooks.Delivery) (payments.Effect, error) {
	ev, err := webhooks.Decode(d)
	if err != nil {
		return "", err
	}
	return k.b.Applier.Apply(k.ctx, ev)
}

// short says the invocation has less than the reserve left.
func (k *walk) short() bool {
	left, ok := k.b.timeLeft(k.ctx)
	return ok && left < k.reserve
}

// budget stops the walk when the invocation has less than the reserve left.
func (k *walk) budget() error {
	if k.short() {
		k.rep.More, k.rep.Stopped = true, "deadline"
		return errStop
	}
	return nil
}

// save commits the walk's position (a scheduled pass only).
func (k *walk) save() error {
	if !k.scheduled {
		return nil
	}
	k.cp.Window = k.w
	doc, _ := json.Marshal(k.cp)
	if err := k.b.Store.Put(k.ctx, payments.EventsTable, store.Item{PK: checkpointKey, Doc: doc}, store.Cond{}); err != nil {
		return fmt.Errorf("backfill: store checkpoint: %w", err)
	}
	return nil
}

// complete ends the window: the log is walked up to its end.
func (k *walk) complete() error {
	if k.inPage > 0 {
		k.rep.Pages++
	}
	k.w.At = k.w.To
	if !k.scheduled {
		return nil
	}
	k.cp.Through, k.cp.Window = k.w.To, nil
	doc, _ := json.Marshal(k.cp)
	if err := k.b.Store.Put(k.ctx, payments.EventsTable, store.Item{PK: checkpointKey, Doc: doc}, store.Cond{}); err != nil {
		return fmt.Errorf("backfill: store checkpoint: %w", err)
	}
	return nil
}

// requeue puts d in the outbox under a deterministic id (RequeueID). There is no transaction
// to join: the Applier failed and committed nothing, and the cursor is committed once
// a page (a page may requeue more than a transaction holds). So this is a single conditional
// put, made before the cursor moves past the event: a crash after it leaves a message the
// relay delivers; a crash before it leaves the cursor behind the event, and the next pass
// lists it again. A message already pending
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
