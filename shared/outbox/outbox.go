package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Table is the logical table of outbox messages, keyed by message id alone.
const Table = "outbox"

// Due is the secondary-index partition of undelivered messages, sorted by when each is next
// due: the relays' work list. Every follow-on effect of every payment is written to it and
// deleted from it, so it is spread over shards by message id: 64 keep each under DynamoDB's
// 1,000 write units a second per index partition at 10,000 payments a second, with room for a
// heavier mix of declines and refunds than docs/capacity.md's (TestNoHotPartition in
// infra/inprocess measures it). Drain merges them back into one list in due order.
var Due = store.Shards{Base: "outbox#due", N: 64}

// drainPage is how many messages Drain reads from a shard at a time.
var drainPage = 100

// sortTime is the due time's layout in the index's sort key.
const sortTime = "20060102T150405.000000000Z"

// MaxIDLen caps a message id (a DynamoDB key stays far below its 2 KiB limit).
const MaxIDLen = 512

// Message is one follow-on effect.
type Message struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
	// DueAt is set on a message written before it is due (NewAt): a durable timer. The stream
	// relay leaves it to the sweep, which delivers it once due.
	DueAt     time.Time `json:"due_at,omitzero"`
	Attempts  int       `json:"attempts,omitempty"`
	LastError string    `json:"last_error,omitempty"`
}

// Waiting reports whether m is a timer whose moment has not come at now: no relay delivers it
// yet, and it is scheduled work rather than work pending.
func (m Message) Waiting(now time.Time) bool { return m.DueAt.After(now) }

// timer reports whether m was written before it was due: nobody but the sweep sees it when
// it falls due, so the sweep takes it at once instead of leaving it to the stream.
func (m Message) timer() bool { return m.DueAt.After(m.CreatedAt) }

// ErrInvalid means a message has no id or kind, or too long an id.
var ErrInvalid = errors.New("outbox: a message needs a kind and an id of 1-512 bytes")

// New returns the write that puts a message in the outbox, for the caller's transaction. The
// id must be a deterministic function of the state change (the same change always names the
// same message), so a repeated change writes the same message again instead of a second one.
func New(kind, id string, payload any, now time.Time) (store.Write, error) {
	return NewAt(kind, id, payload, now, now)
}

// NewAt is New for a message due at due rather than at once: a durable timer with no count
// quota (one item), delivered by the local relay when its clock reaches due and in AWS by the
// scheduled sweep (the stream relay leaves it). A due at or before now is New. Writing the same
// id again with an earlier due brings the timer forward.
func NewAt(kind, id string, payload any, due, now time.Time) (store.Write, error) {
	if kind == "" || id == "" || len(id) > MaxIDLen {
		return store.Write{}, ErrInvalid
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return store.Write{}, fmt.Errorf("outbox: payload of %s: %w", id, err)
	}
	m := Message{ID: id, Kind: kind, Payload: raw, CreatedAt: now.UTC()}
	if due.After(now) {
		m.DueAt = due.UTC()
	} else {
		due = now
	}
	it, err := m.item(due, now)
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Table: Table, Put: &it}, nil
}

// item stores m due at due; the version is the write's time, so the relay's delete of a
// delivered message never removes a newer write of the same id.
func (m Message) item(due, now time.Time) (store.Item, error) {
	doc, err := json.Marshal(m)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{PK: m.ID, Doc: doc, Version: now.UnixNano(), IndexPK: Due.Of(m.ID),
		IndexSK: due.UTC().Format(sortTime) + "#" + m.ID}, nil
}

// Decode reads a message from its item.
func Decode(it store.Item) (Message, error) {
	var m Message
	if err := json.Unmarshal(it.Doc, &m); err != nil {
		return Message{}, fmt.Errorf("outbox: stored message %s: %w", it.PK, err)
	}
	if m.ID == "" || m.Kind == "" {
		return Message{}, fmt.Errorf("outbox: stored message %s: %w", it.PK, ErrInvalid)
	}
	return m, nil
}

// Handler delivers one message. It must be idempotent.
type Handler func(ctx context.Context, m Message) error

// ErrNoHandler means no handler is registered for a message's kind; the message stays.
var ErrNoHandler = errors.New("outbox: no handler for the message kind")

// Relay delivers outbox messages.
type Relay struct {
	Store    store.Store
	Handlers map[string]Handler
	Now      func() time.Time
	// Base and Cap bound the full-jitter backoff between attempts at one message (defaults
	// 200 ms and 1 min).
	Base, Cap time.Duration
	// Rand is the jitter source (default seeded from the clock).
	Rand *rand.Rand
	Log  *slog.Logger
	// MinAge makes Drain leave messages due less than MinAge ago: a sweep behind the stream
	// relay takes only what the stream could not deliver (default 0: everything due). A timer
	// (NewAt) is the sweep's alone and is taken as soon as it is due.
	MinAge time.Duration
	// Lanes is how many messages Drain delivers at once (default 1: one at a time). A message
	// goes to the lane of its id up to the last '#' (OrderKey: one payment's changes,
	// "change#pay_1#..."), so those are delivered one at a time in due order, as one lane
	// delivers everything; messages of different keys are delivered side by side, as the
	// stream relay's shards deliver them in AWS. Each delivery waits for its own commits, so
	// one lane delivers as many messages a second as its store commits in a row.
	Lanes int

	mu sync.Mutex
}

// OrderKey is what a message's id says it must be delivered in order with: the id up to its
// last '#', or the whole id when it has none.
func OrderKey(id string) string {
	if i := strings.LastIndexByte(id, '#'); i > 0 {
		return id[:i]
	}
	return id
}

func (r *Relay) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Relay) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// Deliver runs m's handler and, when it succeeded, marks m done by deleting its item at the
// version it was read at (version 0: whatever is stored). A later write of the same id stays.
func (r *Relay) Deliver(ctx context.Context, m Message, version int64) error {
	h, ok := r.Handlers[m.Kind]
	if !ok {
		return fmt.Errorf("%w %q (%s)", ErrNoHandler, m.Kind, m.ID)
	}
	if err := h(ctx, m); err != nil {
		return fmt.Errorf("outbox: deliver %s: %w", m.ID, err)
	}
	c := store.Cond{Kind: store.Always}
	if version != 0 {
		c = store.Cond{Kind: store.VersionIs, Version: version}
	}
	if err := r.Store.Delete(ctx, Table, m.ID, "", c); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("outbox: mark %s done: %w", m.ID, err)
	}
	r.log().InfoContext(ctx, "outbox delivered", "id", m.ID, "kind", m.Kind, "attempts", m.Attempts+1)
	return nil
}

// Drain delivers every message due now, oldest due first across the shards of Due, and
// reschedules each failure with backoff. It returns how many it delivered and how many failed.
func (r *Relay) Drain(ctx context.Context) (delivered, failed int, err error) {
	now := r.now()
	var done, failures atomic.Int64
	deliver := func(it store.Item) {
		if r.attempt(ctx, it) {
			done.Add(1)
		} else {
			failures.Add(1)
		}
	}
	lanes := make([]chan store.Item, max(r.Lanes, 1))
	var wg sync.WaitGroup
	if len(lanes) > 1 {
		for i := range lanes {
			lanes[i] = make(chan store.Item, drainPage)
			wg.Go(func() {
				for it := range lanes[i] {
					deliver(it)
				}
			})
		}
	}
	q := store.Query{Table: Table, SKTo: now.UTC().Format(sortTime) + "#\xff", Limit: drainPage}
	err = Due.Walk(ctx, r.Store, q, func(it store.Item) bool {
		switch {
		case r.streamOwned(it, now):
		case len(lanes) == 1:
			deliver(it)
		default:
			h := fnv.New32a()
			h.Write([]byte(OrderKey(it.PK)))
			lanes[h.Sum32()%uint32(len(lanes))] <- it
		}
		return true
	})
	if len(lanes) > 1 {
		for _, l := range lanes {
			close(l)
		}
		wg.Wait()
	}
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("outbox: list due: %w", err)
	}
	return int(done.Load()), int(failures.Load()), err
}

// Undelivered lists up to limit undelivered messages' items, soonest due first (limit <= 0:
// all of them): what an operator or a test looks at.
func Undelivered(ctx context.Context, s store.Store, limit int) ([]store.Item, error) {
	var out []store.Item
	err := Due.Walk(ctx, s, store.Query{Table: Table, Limit: 100}, func(it store.Item) bool {
		out = append(out, it)
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// streamOwned reports whether the item is a message the stream relay saw when it was due and
// that fell due less than MinAge ago: the sweep leaves it to the stream.
func (r *Relay) streamOwned(it store.Item, now time.Time) bool {
	if r.MinAge <= 0 || len(it.IndexSK) < len(sortTime) {
		return false
	}
	due, err := time.Parse(sortTime, it.IndexSK[:len(sortTime)])
	if err != nil || !due.After(now.Add(-r.MinAge)) {
		return false
	}
	m, err := Decode(it)
	return err == nil && !m.timer()
}

func (r *Relay) attempt(ctx context.Context, it store.Item) bool {
	m, err := Decode(it)
	if err != nil {
		// Unreadable: keep it where a person finds it, out of the due list, never delete it.
		r.log().ErrorContext(ctx, "outbox message unreadable; parked", "id", it.PK, "error", err)
		it.IndexPK = ""
		_ = r.Store.Put(ctx, Table, it, store.Cond{Kind: store.VersionIs, Version: it.Version})
		return false
	}
	err = r.Deliver(ctx, m, it.Version)
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		// Stopped, not failed (a shutdown, or the invocation's deadline): the message stays due
		// as it is, and its attempts and backoff are kept for deliveries that ran.
		r.log().DebugContext(ctx, "outbox delivery stopped; the message stays due", "id", m.ID, "error", err)
		return false
	}
	m.Attempts++
	m.LastError = err.Error()
	now := r.now()
	due := now.Add(r.backoff(m.Attempts))
	next, ierr := m.item(due, now)
	if ierr == nil {
		next.Version = max(next.Version, it.Version+1)
		ierr = r.Store.Put(ctx, Table, next, store.Cond{Kind: store.VersionIs, Version: it.Version})
	}
	r.log().WarnContext(ctx, "outbox delivery failed; will retry", "id", m.ID, "kind", m.Kind,
		"attempts", m.Attempts, "next", due, "error", err)
	if ierr != nil && !errors.Is(ierr, store.ErrConditionFailed) {
		r.log().ErrorContext(ctx, "outbox reschedule failed; the message stays due", "id", m.ID, "error", ierr)
	}
	return false
}

// backoff is full jitter: uniform in [0, min(Cap, Base*2^(n-1))].
func (r *Relay) backoff(n int) time.Duration {
	base, ceiling := r.Base, r.Cap
	if base <= 0 {
		base = 200 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = time.Minute
	}
	d := ceiling
	if n < 30 {
		d = min(ceiling, base<<max(n-1, 0))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		r.Rand = rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	}
	return time.Duration(r.Rand.Int64N(int64(d) + 1))
}

// Run drains the outbox every interval until ctx ends; kick, when non-nil, drains at once.
func (r *Relay) Run(ctx context.Context, every time.Duration, kick <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.log().ErrorContext(ctx, "outbox drain", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}
