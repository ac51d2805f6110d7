package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Table is the logical table idempotency records live in: one item per scoped key, keyed by PK
// alone.
const Table = "idempotency"

// Record states.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	// StatusPending holds a key whose operation ran with an outcome nobody knows yet (a
	// provider timeout): the caller's fingerprint and request bytes stay under the key until a
	// resolution completes it, so a repeat is checked against them and never runs afresh.
	StatusPending = "pending"
)

// Kind says what Acquire found.
type Kind int

const (
	// New: the caller holds the key and must run the operation, then Complete or Release.
	New Kind = iota + 1
	// Replay: the operation completed before; Outcome.Response is what it answered.
	Replay
	// InProgress: another caller holds the key; retry after Outcome.RetryAfter.
	InProgress
	// Mismatch: the key was used with a different request; Outcome.Fields names what differs.
	Mismatch
	// Pending: the operation ran and its outcome is unknown; Outcome.Response is the interim
	// answer it gave (a 202), Outcome.Request the caller's original bytes. Do resumes it.
	Pending
)

func (k Kind) String() string {
	switch k {
	case New:
		return "new"
	case Replay:
		return "replay"
	case InProgress:
		return "in_progress"
	case Mismatch:
		return "mismatch"
	case Pending:
		return "pending"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Response is what a completed operation answered, stored so a replay can answer the same,
// byte for byte.
type Response struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header,omitempty"`
	Body   []byte            `json:"body"`
}

// Outcome is the typed result of Acquire.
type Outcome struct {
	Kind     Kind
	Lease    *Lease    // New
	Response *Response // Replay
	// InProgress, or Pending while another caller resolves it: RetryAfter is the wait suggested
	// to a caller (a live holder usually finishes well within it); LockExpiresAt is when the
	// holder's lock lapses and the key can be taken whatever became of it (zero: not known).
	RetryAfter    time.Duration
	LockExpiresAt time.Time
	Fields        []string // Mismatch: differing top-level fields, possibly empty
	TakenOver     bool     // New: an expired lock or record was taken over
	// Pending: the request bytes stored with the key, and whether another caller is resolving
	// it right now (then Do answers the interim response without resuming).
	Request   []byte
	Resolving bool
	// Resumed: Do resumed a pending key and ran the operation again under it; Kind is Replay
	// (it completed) or Pending (still unknown).
	Resumed bool

	pending *record // Pending: the stored record, for Resume
	version int64   // Pending: the stored record's version, for Resume
	key     string
}

// Lease is the right to complete one key. Its version is a fencing token: a holder whose lock
// expired and was taken over can no longer complete.
type Lease struct {
	Key         string // scoped key
	Version     int64
	Fingerprint Fingerprint
	AcquiredAt  time.Time
	// FirstTried is when the operation first ran under the key: AcquiredAt for a new key, the
	// original acquisition for a resumed pending one or for an in-progress lock taken over from
	// a holder that died (it may have done the work). Time rules about the first try (a
	// provider's key horizon) read it; FirstTried before AcquiredAt means an earlier run may
	// have had an effect.
	FirstTried time.Time
	// Request is the caller's original request bytes of a resumed pending key; nil for a new one.
	Request []byte
	// Tries counts the earlier runs of a resumed pending key whose outcome stayed unknown.
	Tries int

	prior *record // a resumed pending record, put back if the resumption is released
}

// record is the stored document.
type record struct {
	Status        string      `json:"status"`
	Fingerprint   Fingerprint `json:"fingerprint"`
	Response      *Response   `json:"response,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	CompletedAt   *time.Time  `json:"completed_at,omitempty"`
	LockExpiresAt *time.Time  `json:"lock_expires_at,omitempty"`
	// Pending only: the caller's request bytes, and until when a resolver holds the key. The
	// resolver's lock lives in the document, not in the item's lock attribute, so an Acquire can
	// never take a pending key over (and lose its request) when a resolver dies.
	Request      []byte     `json:"request,omitempty"`
	ResolveUntil *time.Time `json:"resolve_until,omitempty"`
	Tries        int        `json:"tries,omitempty"`
}

// Sentinel errors of the lifecycle.
var (
	// ErrLeaseLost means the lease no longer holds the key: its lock expired and another caller
	// took the key over, or it already completed. Nothing was committed.
	ErrLeaseLost = errors.New("idempotency: lease lost to another caller")
	// ErrRetention means the configured retention does not outlast the retry window.
	ErrRetention = errors.New("idempotency: retention must be longer than the retry window")
)

// Metrics receives one count per lifecycle event: "created", "replayed", "conflicted",
// "mismatched", "taken_over", "completed", "released", "lease_lost".
type Metrics interface {
	Count(ctx context.Context, event string)
}

// Keeper runs the record lifecycle on a store. Build it with NewKeeper, which checks the
// durations and builds the cache once:
//
//	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Now: clock.Now, Log: log})
//
// Store is required; zero values take the defaults.
type Keeper struct {
	Store store.Store
	// Retention is how long a completed key is kept (default 7 days). It must be longer than
	// RetryWindow, or a late retry would find the key gone and run again.
	Retention time.Duration
	// RetryWindow is how long callers may retry (default 3 days).
	RetryWindow time.Duration
	// LockMargin is added to the context deadline to set the lock expiry (default 5 s).
	LockMargin time.Duration
	// DefaultLock is the lock duration when the context has no deadline (default 30 s).
	DefaultLock time.Duration
	// MaxRetryAfter caps the Retry-After suggested for an in-progress key (default 2 s).
	MaxRetryAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives one line per lifecycle event (default slog.Default()).
	Log *slog.Logger
	// Metrics, when set, counts the lifecycle events.
	Metrics Metrics
	// CacheSize keeps up to that many completed records in process, so a replay of one of them
	// costs no store call. Off by default (<= 0); see the package documentation for the
	// trade-off.
	CacheSize int

	cache *cache // completed records, nil when off
}

// The defaults of a Keeper's durations (documented on its fields).
const (
	defaultRetention     = 7 * 24 * time.Hour
	defaultRetryWindow   = 3 * 24 * time.Hour
	defaultLockMargin    = 5 * time.Second
	defaultLock          = 30 * time.Second
	defaultMaxRetryAfter = 2 * time.Second
)

// NewKeeper checks k (Retention must outlast RetryWindow) and returns it ready to use.
func NewKeeper(k Keeper) (*Keeper, error) {
	if k.retention() <= k.retryWindow() {
		return nil, fmt.Errorf("%w: retention %s, retry window %s", ErrRetention, k.retention(), k.retryWindow())
	}
	k.cache = newCache(k.CacheSize)
	return &k, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (k *Keeper) retention() time.Duration   { return orDefault(k.Retention, defaultRetention) }
func (k *Keeper) retryWindow() time.Duration { return orDefault(k.RetryWindow, defaultRetryWindow) }
func (k *Keeper) lockMargin() time.Duration  { return orDefault(k.LockMargin, defaultLockMargin) }
func (k *Keeper) defaultLock() time.Duration { return orDefault(k.DefaultLock, defaultLock) }
func (k *Keeper) maxRetryAfter() time.Duration {
	return orDefault(k.MaxRetryAfter, defaultMaxRetryAfter)
}

func (k *Keeper) now() time.Time {
	if k.Now == nil {
		return time.Now()
	}
	return k.Now()
}

func (k *Keeper) log() *slog.Logger {
	if k.Log == nil {
		return slog.Default()
	}
	return k.Log
}

func (k *Keeper) event(ctx context.Context, name, key string, attrs ...any) {
	if k.Metrics != nil {
		k.Metrics.Count(ctx, name)
	}
	if !k.log().Enabled(ctx, slog.LevelInfo) {
		return // no attributes built for a line nobody writes
	}
	k.log().LogAttrs(ctx, slog.LevelInfo, "idempotency "+name, append([]slog.Attr{slog.String("key", key)}, toAttrs(attrs)...)...)
}

func toAttrs(kv []any) []slog.Attr {
	var out []slog.Attr
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, slog.Any(kv[i].(string), kv[i+1]))
	}
	return out
}

// Acquire claims the scoped key for a request with fingerprint fp, in one conditional write.
// If the key is already known, the stored record comes back with the failed condition, so a
// duplicate costs that one write and no read.
func (k *Keeper) Acquire(ctx context.Context, scope, key string, fp Fingerprint) (Outcome, error) {
	if err := ValidateKey(key); err != nil {
		return Outcome{}, err
	}
	pk := Scoped(scope, key)
	now := k.now()
	if out, ok := k.cached(ctx, pk, fp, now); ok {
		return out, nil
	}
	lockUntil := now.Add(k.defaultLock())
	if dl, ok := ctx.Deadline(); ok {
		// The deadline is a wall-clock instant; the Keeper's clock may be another (a fake in
		// tests, a local stack's settable start), so the lock lasts what is left of it.
		lockUntil = now.Add(time.Until(dl) + k.lockMargin())
	}
	// The fencing token only has to grow across takeovers of one key; a takeover happens after
	// the previous lock expired, so the acquisition time does.
	version := now.UnixNano()
	rec := record{Status: StatusInProgress, Fingerprint: fp, CreatedAt: now.UTC(), LockExpiresAt: ptr(lockUntil.UTC())}
	doc, err := json.Marshal(rec)
	if err != nil {
		return Outcome{}, err
	}
	it := store.Item{PK: pk, Doc: doc, Version: version,
		LockExpiresAt: ceilUnix(lockUntil), ExpiresAt: now.Add(k.retention()).Unix()}
	replaced, err := k.Store.Replace(ctx, Table, it, store.Cond{Kind: store.NotExistsOrLapsed, Now: now.Unix()})
	if err == nil {
		out := Outcome{Kind: New, Lease: &Lease{Key: pk, Version: version, Fingerprint: fp, AcquiredAt: now, FirstTried: now}}
		if replaced != nil {
			// The put replaced an expired lock (or an expired record): a holder died or ran
			// out of time. Its lease can no longer commit (the version moved on). A holder of
			// an in-progress lock may have done the work before it died (a charge sent under
			// the provider key), so the lease says when the key was first tried: time rules
			// about the first try (a provider's key horizon) must count from then.
			out.TakenOver = true
			var old record
			if json.Unmarshal(replaced.Doc, &old) == nil && old.Status == StatusInProgress {
				if fields := old.Fingerprint.Diff(fp); fields != nil {
					// Another body under the key of a holder that may have charged: the key is
					// not free for it. Put the holder's record back (unless someone took the key
					// meanwhile) and answer as for any other body.
					restore := *replaced
					if err := k.Store.Put(ctx, Table, restore, store.Cond{Kind: store.VersionIs, Version: version}); err != nil &&
						!errors.Is(err, store.ErrConditionFailed) {
						return Outcome{}, fmt.Errorf("idempotency: restore %s: %w", pk, err)
					}
					k.event(ctx, "mismatched", pk, "fields", fields)
					return Outcome{Kind: Mismatch, Fields: fields}, nil
				}
				if !old.CreatedAt.IsZero() && old.CreatedAt.Before(now) {
					out.Lease.FirstTried = old.CreatedAt
					// Keep the first try in the record too, so a taker that dies in turn hands
					// it on (unless the key moved on meanwhile: then this lease is lost anyway).
					rec.CreatedAt = old.CreatedAt
					if doc, err := json.Marshal(rec); err == nil {
						it.Doc = doc
						if err := k.Store.Put(ctx, Table, it, store.Cond{Kind: store.VersionIs, Version: version}); err != nil &&
							!errors.Is(err, store.ErrConditionFailed) {
							return Outcome{}, fmt.Errorf("idempotency: keep the first try of %s: %w", pk, err)
						}
					}
				}
			}
			k.event(ctx, "taken_over", pk)
		} else {
			k.event(ctx, "created", pk)
		}
		return out, nil
	}
	var ce *store.ConditionError
	if !errors.As(err, &ce) || ce.Old == nil {
		return Outcome{}, fmt.Errorf("idempotency: acquire: %w", err)
	}
	// The replay path: read only what a completed record's answer needs. The fingerprint's
	// per-field hashes, the times and the request bytes are decoded (in full) only when the
	// record is not a plain replay of this request.
	var quick struct {
		Status      string               `json:"status"`
		Fingerprint struct{ Sum string } `json:"fingerprint"`
		Response    *Response            `json:"response"`
	}
	if err := json.Unmarshal(ce.Old.Doc, &quick); err != nil {
		return Outcome{}, fmt.Errorf("idempotency: stored record for %s: %w", pk, err)
	}
	if quick.Status == StatusCompleted && quick.Response != nil && quick.Fingerprint.Sum == fp.Sum {
		k.remember(pk, fp, quick.Response, ce.Old.ExpiresAt)
		k.event(ctx, "replayed", pk)
		return Outcome{Kind: Replay, Response: quick.Response}, nil
	}
	var old record
	if err := json.Unmarshal(ce.Old.Doc, &old); err != nil {
		return Outcome{}, fmt.Errorf("idempotency: stored record for %s: %w", pk, err)
	}
	if fields := old.Fingerprint.Diff(fp); fields != nil {
		k.event(ctx, "mismatched", pk, "fields", fields)
		return Outcome{Kind: Mismatch, Fields: fields}, nil
	}
	if old.Status == StatusCompleted && old.Response != nil {
		k.remember(pk, old.Fingerprint, old.Response, ce.Old.ExpiresAt)
		k.event(ctx, "replayed", pk)
		return Outcome{Kind: Replay, Response: old.Response}, nil
	}
	if old.Status == StatusPending {
		return k.pendingOutcome(ctx, pk, &old, ce.Old.Version, now), nil
	}
	wait := k.retryAfter(ce.Old.LockExpiresAt, now)
	k.event(ctx, "conflicted", pk, "retry_after", wait)
	return Outcome{Kind: InProgress, RetryAfter: wait, LockExpiresAt: time.Unix(ce.Old.LockExpiresAt, 0)}, nil
}

// Complete stores resp for the lease's key and commits effects with it in one transaction:
// either both are written or neither. If the lease was lost, nothing is written and the error
// is ErrLeaseLost. If an effect's own condition fails, its *store.ConditionError comes back with
// Index counting from the first effect. With no effects, the completion is one conditional
// write (a PutItem in DynamoDB, 1 write unit per KB) instead of a transaction (2 per KB per
// item): the single-write mode, for when the stored result is the record itself.
func (k *Keeper) Complete(ctx context.Context, l *Lease, resp Response, effects ...store.Write) error {
	now := k.now()
	rec := record{Status: StatusCompleted, Fingerprint: l.Fingerprint, Response: &resp,
		CreatedAt: l.firstTried().UTC(), CompletedAt: ptr(now.UTC())}
	if err := k.put(ctx, l, rec, now, effects); err != nil {
		return err
	}
	k.remember(l.Key, l.Fingerprint, &resp, now.Add(k.retention()).Unix())
	k.event(ctx, "completed", l.Key, "status", resp.Status)
	return nil
}

// Release gives the key back after a failure that may be retried, so the next request with it
// runs again; effects (say, a pending payment) commit with the release. An unknown outcome is
// released, never completed.
//
// A resumed pending key is not given back but put back pending, as it was: its outcome is
// still unknown.
func (k *Keeper) Release(ctx context.Context, l *Lease, effects ...store.Write) error {
	if l.prior != nil {
		if err := k.put(ctx, l, *l.prior, k.now(), effects); err != nil {
			return err
		}
		k.event(ctx, "released", l.Key, "pending", true)
		return nil
	}
	cond := store.Cond{Kind: store.VersionIs, Version: l.Version}
	var err error
	if len(effects) == 0 {
		err = k.Store.Delete(ctx, Table, l.Key, "", cond) // one conditional delete, no transaction
	} else {
		err = k.Store.Transact(ctx, append([]store.Write{{Table: Table, Delete: &store.Key{PK: l.Key}, Cond: cond}}, effects...)...)
	}
	if err != nil {
		return k.commitErr(ctx, l, err)
	}
	k.event(ctx, "released", l.Key)
	return nil
}

// Pend stores resp as the interim answer for the lease's key, with the caller's request bytes,
// and commits effects with it: the key stays pending (a repeat with the same request gets resp
// and may resume it; a different request is a Mismatch) until a resumption completes it.
// Use it for an unknown outcome, which must be neither replayed as final nor run afresh.
func (k *Keeper) Pend(ctx context.Context, l *Lease, resp Response, request []byte, effects ...store.Write) error {
	now := k.now()
	rec := record{Status: StatusPending, Fingerprint: l.Fingerprint, Response: &resp, CreatedAt: l.firstTried().UTC(),
		Request: request}
	if l.prior != nil {
		rec.Tries = l.prior.Tries
		if request == nil {
			rec.Request = l.prior.Request
		}
	}
	rec.Tries++
	if err := k.put(ctx, l, rec, now, effects); err != nil {
		return err
	}
	k.event(ctx, "pending", l.Key, "tries", rec.Tries)
	return nil
}

// put commits rec for the lease's key with effects in one transaction, or, with no effects, in
// one conditional write (the single-write completion). The record moves past the lease's
// version, so the lease cannot commit (and its effects) a second time.
func (k *Keeper) put(ctx context.Context, l *Lease, rec record, now time.Time, effects []store.Write) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	it := store.Item{PK: l.Key, Doc: doc, Version: l.Version + 1, ExpiresAt: now.Add(k.retention()).Unix()}
	cond := store.Cond{Kind: store.VersionIs, Version: l.Version}
	if len(effects) == 0 {
		// The record is the whole effect (a typed result that is the business record, an SQS
		// record's completion): one conditional write is atomic without a transaction, and costs
		// half its write units.
		err = k.Store.Put(ctx, Table, it, cond)
	} else {
		err = k.Store.Transact(ctx, append([]store.Write{{Table: Table, Put: &it, Cond: cond}}, effects...)...)
	}
	if err != nil {
		return k.commitErr(ctx, l, err)
	}
	return nil
}

func (k *Keeper) pendingOutcome(ctx context.Context, pk string, old *record, version int64, now time.Time) Outcome {
	out := Outcome{Kind: Pending, Response: old.Response, Request: old.Request, pending: old, version: version, key: pk}
	out.Resolving = old.ResolveUntil != nil && old.ResolveUntil.After(now)
	if out.Resolving {
		out.LockExpiresAt = *old.ResolveUntil
		out.RetryAfter = k.retryAfter(ceilUnix(*old.ResolveUntil), now)
	}
	k.event(ctx, "replayed_pending", pk, "resolving", out.Resolving)
	return out
}

// Resume takes the right to run a pending key's operation again, in one conditional write
// against the version Acquire (or Lookup) read: at most one caller resumes a pending key at a
// time, until the lock expires. It returns ErrLeaseLost when another caller got there first.
// The lease carries the caller's stored request bytes and the time of the first try.
func (k *Keeper) Resume(ctx context.Context, out Outcome) (*Lease, error) {
	if out.Kind != Pending || out.pending == nil {
		return nil, fmt.Errorf("idempotency: resume of a %s key", out.Kind)
	}
	now := k.now()
	lockUntil := now.Add(k.defaultLock())
	if dl, ok := ctx.Deadline(); ok {
		// The deadline is a wall-clock instant; the Keeper's clock may be another (a fake in
		// tests, a local stack's settable start), so the lock lasts what is left of it.
		lockUntil = now.Add(time.Until(dl) + k.lockMargin())
	}
	rec := *out.pending
	rec.ResolveUntil = ptr(lockUntil.UTC())
	doc, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	it := store.Item{PK: out.key, Doc: doc, Version: out.version + 1, ExpiresAt: now.Add(k.retention()).Unix()}
	if err := k.Store.Put(ctx, Table, it, store.Cond{Kind: store.VersionIs, Version: out.version}); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return nil, ErrLeaseLost
		}
		return nil, fmt.Errorf("idempotency: resume %s: %w", out.key, err)
	}
	prior := *out.pending
	prior.ResolveUntil = nil
	k.event(ctx, "resumed", out.key, "tries", prior.Tries)
	return &Lease{Key: out.key, Version: out.version + 1, Fingerprint: rec.Fingerprint, AcquiredAt: now,
		FirstTried: rec.CreatedAt, Request: rec.Request, Tries: rec.Tries, prior: &prior}, nil
}

// Lookup reads the record of a scoped key, for a background resolver that has no request of its
// own: Pending (resumable with Resume), Replay (already completed), InProgress, or New when no
// record exists (nothing to resolve). It costs one strongly consistent read.
func (k *Keeper) Lookup(ctx context.Context, scope, key string) (Outcome, error) {
	pk := Scoped(scope, key)
	if k.cache != nil {
		if e, ok := k.cache.get(pk, k.now()); ok {
			return Outcome{Kind: Replay, Response: e.resp}, nil
		}
	}
	it, err := k.Store.Get(ctx, Table, pk, "")
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{Kind: New}, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("idempotency: lookup %s: %w", pk, err)
	}
	now := k.now()
	if it.ExpiresAt != 0 && it.ExpiresAt < now.Unix() {
		return Outcome{Kind: New}, nil
	}
	var rec record
	if err := json.Unmarshal(it.Doc, &rec); err != nil {
		return Outcome{}, fmt.Errorf("idempotency: stored record for %s: %w", pk, err)
	}
	switch {
	case rec.Status == StatusCompleted && rec.Response != nil:
		return Outcome{Kind: Replay, Response: rec.Response}, nil
	case rec.Status == StatusPending:
		out := k.pendingOutcome(ctx, pk, &rec, it.Version, now)
		return out, nil
	}
	return Outcome{Kind: InProgress, RetryAfter: k.retryAfter(it.LockExpiresAt, now), LockExpiresAt: time.Unix(it.LockExpiresAt, 0)}, nil
}

// cached answers a completed key from the cache (Keeper.CacheSize): Replay, or Mismatch for another
// request.
func (k *Keeper) cached(ctx context.Context, pk string, fp Fingerprint, now time.Time) (Outcome, bool) {
	if k.cache == nil {
		return Outcome{}, false
	}
	e, ok := k.cache.get(pk, now)
	if !ok {
		return Outcome{}, false
	}
	if fields := e.fp.Diff(fp); fields != nil {
		k.event(ctx, "mismatched", pk, "fields", fields, "cached", true)
		return Outcome{Kind: Mismatch, Fields: fields}, true
	}
	k.event(ctx, "replayed", pk, "cached", true)
	return Outcome{Kind: Replay, Response: e.resp}, true
}

// remember caches a completed record (Keeper.CacheSize).
func (k *Keeper) remember(pk string, fp Fingerprint, resp *Response, expiresAt int64) {
	if k.cache != nil {
		k.cache.put(&cacheEntry{pk: pk, fp: fp, resp: resp, expiresAt: expiresAt})
	}
}

// retryAfter is the wait suggested for an in-progress key: until its lock expires, within
// 1 s and MaxRetryAfter.
func (k *Keeper) retryAfter(lockExpiresAt int64, now time.Time) time.Duration {
	return min(max(time.Unix(lockExpiresAt, 0).Sub(now), time.Second), k.maxRetryAfter())
}

func (k *Keeper) commitErr(ctx context.Context, l *Lease, err error) error {
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		if ce.Index == 0 {
			k.event(ctx, "lease_lost", l.Key)
			return ErrLeaseLost
		}
		return &store.ConditionError{Index: ce.Index - 1, Old: ce.Old}
	}
	return fmt.Errorf("idempotency: commit %s: %w", l.Key, err)
}

func (l *Lease) firstTried() time.Time {
	if l.FirstTried.IsZero() {
		return l.AcquiredAt
	}
	return l.FirstTried
}

func ptr[T any](v T) *T { return &v }

// ceilUnix rounds up, so a lock is never considered expired before its time.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
