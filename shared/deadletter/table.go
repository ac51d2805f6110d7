package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Table is the store table of dead-letter records.
//
// Items:
//
//	PK "<record id>"          one record; IndexPK "status#<status>", IndexSK "<created>#<id>"
//	PK "counter#open"         the open count (Version counts its updates)
//	PK "hour#<yyyy-mm-ddThh>" the open count at the end of that hour; IndexPK "hourly#open"
//
// The status index lists one status newest first; other filters are applied in memory over
// the index pages (see List for the cost).
const Table = "deadletters"

const (
	skTime     = "2006-01-02T15:04:05.000000000Z"
	hourLayout = "2006-01-02T15"
	counterPK  = "counter#open"
	hourlyPK   = "hourly#open"
	// maxTries bounds the optimistic-concurrency loop of one action.
	maxTries = 16
	// MaxScan bounds the index items one List call reads.
	MaxScan = 1000
	// DefaultLimit and MaxLimit bound a List page.
	DefaultLimit = 50
	MaxLimit     = 200
	// MaxNote and MaxResult bound operator text.
	MaxNote   = 2000
	MaxResult = 200
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("deadletter: record not found")
	// ErrNoteRequired means an override came without a note (or without an outcome).
	ErrNoteRequired = errors.New("deadletter: a note and an outcome are required")
	// ErrRetryNoteRequired means a retry against the record's own suggestion (a hard decline:
	// Record.RetryAdvised) came without a note saying why. It wraps ErrNoteRequired.
	ErrRetryNoteRequired = fmt.Errorf("%w: a retry against the suggestion needs a note", ErrNoteRequired)
	// ErrInvalid means a request was malformed (bad filter, cursor, over-long note).
	ErrInvalid = errors.New("deadletter: invalid request")
	// ErrNotRetryable means the record has no retry target (a reconciliation difference).
	ErrNotRetryable = errors.New("deadletter: record cannot be retried")
	// ErrClosed means the record is resolved or overridden: no further action applies.
	ErrClosed = errors.New("deadletter: record is closed")
	// ErrBusy means the record kept changing under the action; the caller may try again.
	ErrBusy = errors.New("deadletter: record changed concurrently")
	// ErrRequeue means the relay has no Requeuer to hand a retry to its target (a wiring
	// mistake); the retry's message stays in the outbox.
	ErrRequeue = errors.New("deadletter: retry could not be sent")
)

// Requeuer sends a retry to its target: the original queue (the local queue or SQS) or a
// recovery restart. retryID is deterministic per (record, retry number); a consumer can dedupe
// on it.
type Requeuer interface {
	Requeue(ctx context.Context, t Target, retryID string) error
}

// RequeueFunc adapts a function to Requeuer.
type RequeueFunc func(ctx context.Context, t Target, retryID string) error

// Requeue calls f.
func (f RequeueFunc) Requeue(ctx context.Context, t Target, retryID string) error {
	return f(ctx, t, retryID)
}

// Records are the dead-letter records on a store.Store (the Table), built as a literal:
//
//	t := &deadletter.Records{Store: s, Log: log}
//
// Store is required. Now defaults to time.Now, Log to slog.Default(), and a nil Metrics
// writes no metric lines.
//
// A retry commits an outbox message (KindRetry) with the record's move to retrying, so no
// crash leaves a record retrying with nothing sent and the operator's function links no queue
// or Step Functions client. The outbox relay's Records, which has the Requeuer, sends it
// (RetryFollowOn):
//
//	ops := &deadletter.Records{Store: s}
//	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{
//		deadletter.KindRetry: (&deadletter.Records{Store: s, Requeuer: r}).RetryFollowOn()}}
type Records struct {
	Store store.Store
	// Requeuer sends retries to their target, from RetryFollowOn in the outbox relay.
	Requeuer Requeuer
	Now      func() time.Time
	Log      *slog.Logger
	// Metrics receives the open-count metric lines.
	Metrics *EMF
}

func (t *Records) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

func (t *Records) log() *slog.Logger {
	if t.Log == nil {
		return slog.Default()
	}
	return t.Log
}

func indexKeys(r Record) (string, string) {
	return "status#" + string(r.Status), r.CreatedAt.UTC().Format(skTime) + "#" + r.ID
}

func (r Record) item() (store.Item, error) {
	doc, err := json.Marshal(r)
	if err != nil {
		return store.Item{}, fmt.Errorf("deadletter: encode %s: %w", r.ID, err)
	}
	ipk, isk := indexKeys(r)
	return store.Item{PK: r.ID, Doc: doc, Version: r.Version, IndexPK: ipk, IndexSK: isk}, nil
}

func decode(it store.Item) (Record, error) {
	var r Record
	if err := json.Unmarshal(it.Doc, &r); err != nil {
		return Record{}, fmt.Errorf("deadletter: decode %s: %w", it.PK, err)
	}
	r.Version = it.Version
	return r, nil
}

// Open stores r as a new open record, or returns the record already stored under the same id
// (created false). ID is derived from Source and Key when empty; the explanation and
// suggested action are written from Cause and Facts when empty.
//
// Opening is idempotent: a second Open of the same key appends nothing. The one exception is
// a record in retrying whose retry died again: a new try (a message id the record has not
// seen) reopens it, so a failed retry comes back to the operator.
func (t *Records) Open(ctx context.Context, r Record) (Record, bool, error) {
	if r.Key == "" && r.ID == "" {
		return Record{}, false, fmt.Errorf("%w: a record needs a key", ErrInvalid)
	}
	if r.Source == "" {
		r.Source = SourceUnknown
	}
	if r.ID == "" {
		r.ID = RecordID(r.Source, r.Key)
	}
	now := t.now().UTC()
	if r.Explanation == "" || r.SuggestedAction == "" {
		e, a := Explain(r.Cause, r.Facts)
		if r.Explanation == "" {
			r.Explanation = e
		}
		if r.SuggestedAction == "" {
			r.SuggestedAction = a
		}
	}
	r.Status, r.CreatedAt, r.UpdatedAt, r.Version, r.Retries = StatusOpen, now, now, 1, 0
	if r.Tries == nil {
		r.Tries = []Try{}
	}
	r.Audit = []Audit{{At: now, Actor: "system", Action: ActionOpened, To: StatusOpen}}

	for try := 0; try < maxTries; try++ {
		it, err := r.item()
		if err != nil {
			return Record{}, false, err
		}
		n, err := t.commit(ctx, store.Write{Table: Table, Put: &it, Cond: store.Cond{Kind: store.NotExists}}, +1, now)
		if err == nil {
			t.log().InfoContext(ctx, "dead-lettered", "record", r.ID, "source", r.Source, "class", r.Cause, "key", r.Key)
			t.emit(n, now)
			return r, true, nil
		}
		var ce *store.ConditionError
		if !errors.As(err, &ce) {
			return Record{}, false, err
		}
		if ce.Index != 0 || ce.Old == nil {
			continue // the counter moved; try again
		}
		old, err := decode(*ce.Old)
		if err != nil {
			return Record{}, false, err
		}
		if old.Status != StatusRetrying || !hasNewTry(old, r.Tries) {
			return old, false, nil
		}
		reopened, n, err := t.reopen(ctx, old, r.Tries, now)
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Record{}, false, err
		}
		t.emit(n, now)
		return reopened, false, nil
	}
	return Record{}, false, fmt.Errorf("%w: %s", ErrBusy, r.ID)
}

func hasNewTry(r Record, in []Try) bool {
	seen := make(map[string]bool, len(r.Tries))
	for _, a := range r.Tries {
		if a.MessageID != "" {
			seen[a.MessageID] = true
		}
	}
	for _, a := range in {
		if a.MessageID == "" || !seen[a.MessageID] {
			return true
		}
	}
	return false
}

func (t *Records) reopen(ctx context.Context, old Record, attempts []Try, now time.Time) (Record, int64, error) {
	r := old
	r.Tries = append(append([]Try{}, old.Tries...), attempts...)
	r.Status, r.UpdatedAt, r.Version = StatusOpen, now, old.Version+1
	r.Audit = append(append([]Audit{}, old.Audit...), Audit{At: now, Actor: "system", Action: ActionReopened,
		Note: "the retried work failed again", From: StatusRetrying, To: StatusOpen})
	it, err := r.item()
	if err != nil {
		return Record{}, 0, err
	}
	n, err := t.commit(ctx, store.Write{Table: Table, Put: &it, Cond: store.Cond{Kind: store.VersionIs, Version: old.Version}}, +1, now)
	if err != nil {
		return Record{}, 0, err
	}
	t.log().InfoContext(ctx, "dead-letter reopened", "record", r.ID)
	return r, n, nil
}

// commit writes w together with the open counter moved by delta and the current hour's
// snapshot, in one transaction, and returns the new open count.
//
// Extra writes (a retry's ledger entry) go in the same transaction after those; a failed
// condition on one of them is a *store.ConditionError whose Index is extraIndex(delta, i).
func (t *Records) commit(ctx context.Context, w store.Write, delta int64, now time.Time, extra ...store.Write) (int64, error) {
	if delta == 0 {
		return -1, t.Store.Transact(ctx, append([]store.Write{w}, extra...)...)
	}
	cur, err := t.Store.Get(ctx, Table, counterPK, "")
	cond := store.Cond{Kind: store.VersionIs, Version: cur.Version}
	var c counter
	switch {
	case errors.Is(err, store.ErrNotFound):
		cond = store.Cond{Kind: store.NotExists}
	case err != nil:
		return 0, fmt.Errorf("deadletter: read counter: %w", err)
	default:
		if err := json.Unmarshal(cur.Doc, &c); err != nil {
			return 0, fmt.Errorf("deadletter: decode counter: %w", err)
		}
	}
	c.Open += delta
	if c.Open < 0 {
		c.Open = 0
	}
	doc, _ := json.Marshal(c)
	hour := now.UTC().Format(hourLayout)
	hdoc, _ := json.Marshal(HourCount{Hour: now.UTC().Truncate(time.Hour), Open: c.Open})
	err = t.Store.Transact(ctx, append([]store.Write{w,
		store.Write{Table: Table, Put: &store.Item{PK: counterPK, Doc: doc, Version: cur.Version + 1}, Cond: cond},
		store.Write{Table: Table, Put: &store.Item{PK: "hour#" + hour, Doc: hdoc, IndexPK: hourlyPK, IndexSK: hour}},
	}, extra...)...)
	if err != nil {
		return 0, err
	}
	return c.Open, nil
}

// extraIndex is the position in commit's transaction of extra write i.
func extraIndex(delta int64, i int) int {
	if delta == 0 {
		return 1 + i
	}
	return 3 + i
}

type counter struct {
	Open int64 `json:"open"`
}

func (t *Records) emit(n int64, at time.Time) {
	if n >= 0 && t.Metrics != nil {
		t.Metrics.Open(n, at)
	}
}

// Get returns the record with the id, or ErrNotFound.
func (t *Records) Get(ctx context.Context, id string) (Record, error) {
	if !strings.HasPrefix(id, "dl_") || len(id) > 64 {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	it, err := t.Store.Get(ctx, Table, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("deadletter: get %s: %w", id, err)
	}
	return decode(it)
}
