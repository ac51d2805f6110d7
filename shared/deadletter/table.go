package deadletter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/metrics"
	"github.com/runtwice/twice/shared/store"
)

// TableName is the store table of dead-letter records.
//
// Items:
//
//	PK "<record id>"          one record; IndexPK "status#<status>", IndexSK "<created>#<id>"
//	PK "counter#open"         the open count (Version counts its updates)
//	PK "hour#<yyyy-mm-ddThh>" the open count at the end of that hour; IndexPK "hourly#open"
//
// The status index lists one status newest first; other filters are applied in memory over
// the index pages (see List for the cost).
const TableName = "deadletters"

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
	// MaxNote and MaxOutcome bound operator text.
	MaxNote    = 2000
	MaxOutcome = 200
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("deadletter: record not found")
	// ErrNoteRequired means an override came without a note (or without an outcome).
	ErrNoteRequired = errors.New("deadletter: a note and an outcome are required")
	// ErrInvalid means a request was malformed (bad filter, cursor, over-long note).
	ErrInvalid = errors.New("deadletter: invalid request")
	// ErrNotRetryable means the record has no retry target (a reconciliation difference).
	ErrNotRetryable = errors.New("deadletter: record cannot be retried")
	// ErrClosed means the record is resolved or overridden: no further action applies.
	ErrClosed = errors.New("deadletter: record is closed")
	// ErrBusy means the record kept changing under the action; the caller may try again.
	ErrBusy = errors.New("deadletter: record changed concurrently")
	// ErrRequeue means the retry could not be handed to its target; the record went back to
	// its previous status.
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

// Table is the dead-letter table on a store.Store.
type Table struct {
	store   store.Store
	requeue Requeuer
	now     func() time.Time
	log     *slog.Logger
	metrics *EMF
}

// Option configures a Table.
type Option func(*Table)

// WithClock injects the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(t *Table) { t.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(t *Table) { t.log = l } }

// WithMetrics sets where the open-count metric lines go (default: nowhere).
func WithMetrics(m *EMF) Option { return func(t *Table) { t.metrics = m } }

// NewTable returns the table on s; retries go to r.
func NewTable(s store.Store, r Requeuer, opts ...Option) *Table {
	t := &Table{store: s, requeue: r, now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(t)
	}
	return t
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
// suggested action are written from Class and Facts when empty.
//
// Opening is idempotent: a second Open of the same key appends nothing. The one exception is
// a record in retrying whose retry died again: a new attempt (a message id the record has not
// seen) reopens it, so a failed retry comes back to the operator.
func (t *Table) Open(ctx context.Context, r Record) (Record, bool, error) {
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
		e, a := Explain(r.Class, r.Facts)
		if r.Explanation == "" {
			r.Explanation = e
		}
		if r.SuggestedAction == "" {
			r.SuggestedAction = a
		}
	}
	r.Status, r.CreatedAt, r.UpdatedAt, r.Version, r.Retries = StatusOpen, now, now, 1, 0
	if r.Attempts == nil {
		r.Attempts = []Attempt{}
	}
	r.Audit = []Audit{{At: now, Actor: "system", Action: ActionOpened, To: StatusOpen}}

	for try := 0; try < maxTries; try++ {
		it, err := r.item()
		if err != nil {
			return Record{}, false, err
		}
		n, err := t.commit(ctx, store.Write{Table: TableName, Put: &it, Cond: store.Cond{Kind: store.NotExists}}, +1, now)
		if err == nil {
			t.log.InfoContext(ctx, "dead-lettered", "record", r.ID, "source", r.Source, "class", r.Class, "key", r.Key)
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
		if old.Status != StatusRetrying || !hasNewAttempt(old, r.Attempts) {
			return old, false, nil
		}
		reopened, n, err := t.reopen(ctx, old, r.Attempts, now)
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

func hasNewAttempt(r Record, in []Attempt) bool {
	seen := make(map[string]bool, len(r.Attempts))
	for _, a := range r.Attempts {
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

func (t *Table) reopen(ctx context.Context, old Record, attempts []Attempt, now time.Time) (Record, int64, error) {
	r := old
	r.Attempts = append(append([]Attempt{}, old.Attempts...), attempts...)
	r.Status, r.UpdatedAt, r.Version = StatusOpen, now, old.Version+1
	r.Audit = append(append([]Audit{}, old.Audit...), Audit{At: now, Actor: "system", Action: ActionReopened,
		Note: "the retried work failed again", From: StatusRetrying, To: StatusOpen})
	it, err := r.item()
	if err != nil {
		return Record{}, 0, err
	}
	n, err := t.commit(ctx, store.Write{Table: TableName, Put: &it, Cond: store.Cond{Kind: store.VersionIs, Version: old.Version}}, +1, now)
	if err != nil {
		return Record{}, 0, err
	}
	t.log.InfoContext(ctx, "dead-letter reopened", "record", r.ID)
	return r, n, nil
}

// commit writes w together with the open counter moved by delta and the current hour's
// snapshot, in one transaction, and returns the new open count.
//
// Extra writes (a retry's ledger entry) go in the same transaction after those; a failed
// condition on one of them is a *store.ConditionError whose Index is extraIndex(delta, i).
func (t *Table) commit(ctx context.Context, w store.Write, delta int64, now time.Time, extra ...store.Write) (int64, error) {
	if delta == 0 {
		return -1, t.store.Transact(ctx, append([]store.Write{w}, extra...)...)
	}
	cur, err := t.store.Get(ctx, TableName, counterPK, "")
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
	err = t.store.Transact(ctx, append([]store.Write{w,
		store.Write{Table: TableName, Put: &store.Item{PK: counterPK, Doc: doc, Version: cur.Version + 1}, Cond: cond},
		store.Write{Table: TableName, Put: &store.Item{PK: "hour#" + hour, Doc: hdoc, IndexPK: hourlyPK, IndexSK: hour}},
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

func (t *Table) emit(n int64, at time.Time) {
	if n >= 0 && t.metrics != nil {
		t.metrics.Open(n, at)
	}
}

// Get returns the record with the id, or ErrNotFound.
func (t *Table) Get(ctx context.Context, id string) (Record, error) {
	if !strings.HasPrefix(id, "dl_") || len(id) > 64 {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	it, err := t.store.Get(ctx, TableName, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("deadletter: get %s: %w", id, err)
	}
	return decode(it)
}

// OpenCount returns the number of open records.
func (t *Table) OpenCount(ctx context.Context) (int64, error) {
	it, err := t.store.Get(ctx, TableName, counterPK, "")
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("deadletter: read counter: %w", err)
	}
	var c counter
	if err := json.Unmarshal(it.Doc, &c); err != nil {
		return 0, fmt.Errorf("deadletter: decode counter: %w", err)
	}
	return c.Open, nil
}

// HourCount is the open count at the end of an hour (or now, for the current hour).
type HourCount struct {
	Hour time.Time `json:"hour"`
	Open int64     `json:"open"`
}

// OpenHistory returns one count per hour for the hours ending at now, oldest first. Hours in
// which nothing changed carry the previous hour's count.
func (t *Table) OpenHistory(ctx context.Context, hours int) ([]HourCount, error) {
	if hours <= 0 || hours > 24*31 {
		return nil, fmt.Errorf("%w: hours %d", ErrInvalid, hours)
	}
	end := t.now().UTC().Truncate(time.Hour)
	start := end.Add(-time.Duration(hours-1) * time.Hour)
	// The hour before the window gives the starting level.
	var before int64
	prev, err := t.store.Query(ctx, store.Query{Table: TableName, Index: true, PK: hourlyPK,
		SKTo: start.Add(-time.Hour).Format(hourLayout), Desc: true, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("deadletter: read history: %w", err)
	}
	if len(prev.Items) == 1 {
		var h HourCount
		if json.Unmarshal(prev.Items[0].Doc, &h) == nil {
			before = h.Open
		}
	}
	known := map[string]int64{}
	q := store.Query{Table: TableName, Index: true, PK: hourlyPK, SKFrom: start.Format(hourLayout), SKTo: end.Format(hourLayout)}
	for {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("deadletter: read history: %w", err)
		}
		for _, it := range page.Items {
			var h HourCount
			if json.Unmarshal(it.Doc, &h) == nil {
				known[it.IndexSK] = h.Open
			}
		}
		if page.Cursor == "" {
			break
		}
		q.Cursor = page.Cursor
	}
	out := make([]HourCount, 0, hours)
	level := before
	for h := start; !h.After(end); h = h.Add(time.Hour) {
		if n, ok := known[h.Format(hourLayout)]; ok {
			level = n
		}
		out = append(out, HourCount{Hour: h, Open: level})
	}
	return out, nil
}

// Filter selects records for List and BulkRetry. The zero Status means open.
type Filter struct {
	Status Status
	Source Source
	Class  Class
	// From and To bound the creation time, both inclusive; zero means unbounded.
	From, To time.Time
	// Text matches, case-insensitively, the id, key, payment and event ids, the explanation
	// and the payload.
	Text   string
	Limit  int
	Cursor string
}

// Page is one page of a List, newest first. Cursor is "" when nothing more can match.
type Page struct {
	Records []Record `json:"records"`
	Cursor  string   `json:"cursor,omitempty"`
	// Scanned is how many records were read to fill the page.
	Scanned int `json:"scanned"`
}

// List returns the records matching f, newest first.
//
// Cost: one index query per 100 records of the status partition within the time range;
// source, class and text filters are applied in memory. A selective filter over a large
// partition therefore reads many items for few results: one call reads at most MaxScan items
// and then returns a cursor (perhaps with fewer than Limit records), so a page is bounded in
// time and the caller pages on. The cursor is the position in the index, so records opened
// meanwhile never shift a page.
func (t *Table) List(ctx context.Context, f Filter) (Page, error) {
	if f.Status == "" {
		f.Status = StatusOpen
	}
	if !f.Status.Valid() {
		return Page{}, fmt.Errorf("%w: status %q", ErrInvalid, f.Status)
	}
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit > MaxLimit {
		f.Limit = MaxLimit
	}
	q := store.Query{Table: TableName, Index: true, PK: "status#" + string(f.Status), Desc: true, Limit: 100}
	if !f.From.IsZero() {
		q.SKFrom = f.From.UTC().Format(skTime)
	}
	if !f.To.IsZero() {
		q.SKTo = f.To.UTC().Format(skTime) + "#~"
	}
	after := ""
	if f.Cursor != "" {
		sk, err := DecodeCursor(f.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = sk
		if q.SKTo == "" || sk < q.SKTo {
			q.SKTo = sk
		}
	}
	text := strings.ToLower(f.Text)
	var out Page
	out.Records = []Record{}
	last := ""
	for {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return Page{}, fmt.Errorf("deadletter: list: %w", err)
		}
		for i, it := range page.Items {
			if it.IndexSK == after {
				continue
			}
			out.Scanned++
			last = it.IndexSK
			r, err := decode(it)
			if err != nil {
				return Page{}, err
			}
			if f.matches(r, text) {
				out.Records = append(out.Records, r)
			}
			more := i < len(page.Items)-1 || page.Cursor != ""
			if (len(out.Records) == f.Limit || out.Scanned >= MaxScan) && more {
				out.Cursor = EncodeCursor(last)
				return out, nil
			}
		}
		if page.Cursor == "" {
			return out, nil
		}
		q.Cursor = page.Cursor
	}
}

func (f Filter) matches(r Record, lowerText string) bool {
	if f.Source != "" && r.Source != f.Source {
		return false
	}
	if f.Class != "" && r.Class != f.Class {
		return false
	}
	if lowerText == "" {
		return true
	}
	for _, s := range []string{r.ID, r.Key, r.PaymentID, r.EventID, r.IdempotencyKey, r.Explanation, string(r.Class), string(r.Payload)} {
		if strings.Contains(strings.ToLower(s), lowerText) {
			return true
		}
	}
	return false
}

// EncodeCursor and DecodeCursor turn an index position into an opaque cursor and back.
func EncodeCursor(sk string) string { return base64.RawURLEncoding.EncodeToString([]byte(sk)) }

// DecodeCursor returns the index position of a cursor, or ErrInvalid.
func DecodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < len(skTime) || len(b) > 128 || !utf8.Valid(b) {
		return "", fmt.Errorf("%w: cursor", ErrInvalid)
	}
	if _, err := time.Parse(skTime, string(b[:len(skTime)])); err != nil {
		return "", fmt.Errorf("%w: cursor", ErrInvalid)
	}
	return string(b), nil
}

// change applies fn to the current record and commits the result, conditioned on the version
// it read; when someone else changed the record first it reads again and re-applies fn, which
// sees the new state (a second click sees retrying and does nothing). fn returns false to
// leave the record as it is.
func (t *Table) change(ctx context.Context, id string, fn func(r *Record, now time.Time) (bool, error)) (Record, bool, error) {
	return t.changeWith(ctx, id, nil, fn)
}

// changeWith is change with extra writes committed in the same transaction as the record
// (built from the changed record). A failed condition on an extra write leaves the record as
// it is (changed false, no error): the extra write is a guard that says the change was made.
func (t *Table) changeWith(ctx context.Context, id string, extra func(r Record, now time.Time) []store.Write,
	fn func(r *Record, now time.Time) (bool, error)) (Record, bool, error) {
	for try := 0; try < maxTries; try++ {
		old, err := t.Get(ctx, id)
		if err != nil {
			return Record{}, false, err
		}
		now := t.now().UTC()
		r := old
		r.Audit = append([]Audit{}, old.Audit...)
		changed, err := fn(&r, now)
		if err != nil || !changed {
			return old, false, err
		}
		r.UpdatedAt, r.Version = now, old.Version+1
		it, err := r.item()
		if err != nil {
			return Record{}, false, err
		}
		var delta int64
		if old.Status == StatusOpen && r.Status != StatusOpen {
			delta = -1
		} else if old.Status != StatusOpen && r.Status == StatusOpen {
			delta = +1
		}
		var ex []store.Write
		if extra != nil {
			ex = extra(r, now)
		}
		n, err := t.commit(ctx, store.Write{Table: TableName, Put: &it, Cond: store.Cond{Kind: store.VersionIs, Version: old.Version}}, delta, now, ex...)
		var ce *store.ConditionError
		if errors.As(err, &ce) && len(ex) > 0 && ce.Index >= extraIndex(delta, 0) {
			return old, false, nil
		}
		if errors.Is(err, store.ErrConditionFailed) || errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return Record{}, false, fmt.Errorf("deadletter: update %s: %w", id, err)
		}
		t.emit(n, now)
		return r, true, nil
	}
	return Record{}, false, fmt.Errorf("%w: %s", ErrBusy, id)
}

func checkNote(note string) error {
	if len(note) > MaxNote || !utf8.ValidString(note) {
		return fmt.Errorf("%w: note too long or not UTF-8", ErrInvalid)
	}
	return nil
}

// Retry re-sends the record's work to its target with retry id RetryID(id, n), where n is the
// record's next retry number, and moves it to retrying. A record already retrying is left as
// it is (retried false): a double click, or two operators at once, retries once. When the
// target refuses the retry, the record returns to its previous status with a retry_failed
// audit entry, and the error wraps ErrRequeue.
func (t *Table) Retry(ctx context.Context, id, actor, note string) (Record, bool, error) {
	return t.RetrySeen(ctx, id, actor, note, -1)
}

// RetrySeen is Retry from an operator who saw the record with seen retries (a form, an API
// body): when the record has had a retry since (a double click whose first click's retry
// already ended, resolved or open again), it is left as it is (retried false), so the work is
// done once however fast the first retry ends. seen < 0 checks nothing.
func (t *Table) RetrySeen(ctx context.Context, id, actor, note string, seen int) (Record, bool, error) {
	if err := checkNote(note); err != nil {
		return Record{}, false, err
	}
	if t.requeue == nil {
		return Record{}, false, fmt.Errorf("%w: no requeuer configured", ErrRequeue)
	}
	var from Status
	r, retried, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		if seen >= 0 && r.Retries != seen {
			return false, nil // retried since the operator looked: this is a second click
		}
		switch r.Status {
		case StatusRetrying:
			return false, nil
		case StatusResolved, StatusOverridden:
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		if !r.Target.Retryable() {
			return false, fmt.Errorf("%w: %s", ErrNotRetryable, r.ID)
		}
		from = r.Status
		r.Retries++
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: ActionRetry, Note: note, From: r.Status,
			To: StatusRetrying, RetryID: RetryID(r.ID, r.Retries)})
		r.Status = StatusRetrying
		return true, nil
	})
	if err != nil || !retried {
		return r, false, err
	}
	retryID := RetryID(r.ID, r.Retries)
	tgt := r.Target
	tgt.Retry, tgt.RecordID = r.Retries, r.ID
	if err := t.requeue.Requeue(ctx, tgt, retryID); err != nil {
		t.log.ErrorContext(ctx, "dead-letter retry not sent", "record", r.ID, "retry_id", retryID, "err", err)
		n := r.Retries
		back, _, berr := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
			if r.Status != StatusRetrying || r.Retries != n {
				return false, nil
			}
			r.Audit = append(r.Audit, Audit{At: now, Actor: "system", Action: ActionRetryError,
				Note: "the retry could not be sent; try again", From: StatusRetrying, To: from, RetryID: retryID})
			r.Status = from
			return true, nil
		})
		if berr != nil {
			return r, false, fmt.Errorf("%w: %s (and the record stays retrying: %v)", ErrRequeue, id, berr)
		}
		return back, false, fmt.Errorf("%w: %s", ErrRequeue, id)
	}
	t.log.InfoContext(ctx, "dead-letter retried", "record", r.ID, "retry_id", retryID, "actor", actor)
	return r, true, nil
}

// Override closes the record with a manual outcome. Both outcome and note are required.
func (t *Table) Override(ctx context.Context, id, actor, outcome, note string) (Record, error) {
	outcome, note = strings.TrimSpace(outcome), strings.TrimSpace(note)
	if outcome == "" || note == "" {
		return Record{}, ErrNoteRequired
	}
	if len(outcome) > MaxOutcome || !utf8.ValidString(outcome) {
		return Record{}, fmt.Errorf("%w: outcome too long or not UTF-8", ErrInvalid)
	}
	if err := checkNote(note); err != nil {
		return Record{}, err
	}
	r, _, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		if r.Status == StatusResolved || r.Status == StatusOverridden {
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: ActionOverride, Note: note, Outcome: outcome, From: r.Status, To: StatusOverridden})
		r.Status, r.Outcome = StatusOverridden, outcome
		return true, nil
	})
	return r, err
}

// Resolve closes the record: the work is done, by a retry or by hand.
func (t *Table) Resolve(ctx context.Context, id, actor, note string) (Record, error) {
	return t.settle(ctx, id, actor, note, ActionResolve, StatusResolved)
}

// Ignore sets the record aside: nothing will be done. An ignored record can still be retried
// or resolved later.
func (t *Table) Ignore(ctx context.Context, id, actor, note string) (Record, error) {
	return t.settle(ctx, id, actor, note, ActionIgnore, StatusIgnored)
}

func (t *Table) settle(ctx context.Context, id, actor, note, action string, to Status) (Record, error) {
	if err := checkNote(strings.TrimSpace(note)); err != nil {
		return Record{}, err
	}
	r, _, err := t.change(ctx, id, func(r *Record, now time.Time) (bool, error) {
		switch {
		case r.Status == to:
			return false, nil // a repeated click: nothing to do, nothing to audit
		case r.Status == StatusResolved || r.Status == StatusOverridden:
			return false, fmt.Errorf("%w: %s is %s", ErrClosed, r.ID, r.Status)
		}
		r.Audit = append(r.Audit, Audit{At: now, Actor: actor, Action: action, Note: strings.TrimSpace(note), From: r.Status, To: to})
		r.Status = to
		return true, nil
	})
	return r, err
}

// BulkResult counts what a BulkRetry did.
type BulkResult struct {
	Matched int      `json:"matched"`
	Retried int      `json:"retried"`
	Skipped int      `json:"skipped"`
	Failed  int      `json:"failed"`
	IDs     []string `json:"retried_ids"`
}

// MaxBulk bounds the records one BulkRetry touches.
const MaxBulk = 500

// BulkRetry retries every record matching f (open by default), up to MaxBulk. Each retry is
// audited on its record like a single retry; records that cannot be retried are skipped.
func (t *Table) BulkRetry(ctx context.Context, f Filter, actor, note string) (BulkResult, error) {
	if f.Status == "" {
		f.Status = StatusOpen
	}
	if f.Status != StatusOpen && f.Status != StatusIgnored {
		return BulkResult{}, fmt.Errorf("%w: bulk retry works on open or ignored records", ErrInvalid)
	}
	if note == "" {
		note = "bulk retry"
	}
	var ids []string
	f.Cursor, f.Limit = "", MaxLimit
	for len(ids) < MaxBulk {
		page, err := t.List(ctx, f)
		if err != nil {
			return BulkResult{}, err
		}
		for _, r := range page.Records {
			if len(ids) < MaxBulk {
				ids = append(ids, r.ID)
			}
		}
		if page.Cursor == "" {
			break
		}
		f.Cursor = page.Cursor
	}
	res := BulkResult{Matched: len(ids), IDs: []string{}}
	for _, id := range ids {
		_, retried, err := t.Retry(ctx, id, actor, note)
		switch {
		case err == nil && retried:
			res.Retried++
			res.IDs = append(res.IDs, id)
		case err == nil, errors.Is(err, ErrNotRetryable), errors.Is(err, ErrClosed):
			res.Skipped++
		default:
			res.Failed++
			t.log.ErrorContext(ctx, "bulk retry failed for a record", "record", id, "err", err)
		}
	}
	return res, nil
}

// EMF writes the open count as the DeadLetterOpen metric (namespace Twice, dimension Stage)
// in Embedded Metric Format; the dead-letter alarms watch it. Every writer of records
// (deadletter-sink, operator-api, recovery-steps, reconciler) wires one.
type EMF struct {
	Out *metrics.EMF
}

// MetricOpen is the metric name of the open count.
const MetricOpen = "DeadLetterOpen"

// Open writes one metric line for the open count n at time at.
func (m *EMF) Open(n int64, at time.Time) {
	if m == nil {
		return
	}
	m.Out.Put(at, nil, nil, metrics.Value{Name: MetricOpen, Unit: metrics.Count, V: float64(n)})
}
