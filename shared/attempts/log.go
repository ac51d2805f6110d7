package attempts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/store"
)

// Table is the logical table attempts live in.
//
// Each attempt is written once per way to find it, all in one transaction:
//
//	PK "att#<id>"             SK "attempt"             Get by id
//	PK "idem#<digest(scope, key)>" SK "<started_at>#<id>"  Lookup by idempotency key (LookupKey, Lookup)
//	PK "pay#<digest(id)>"     SK "<started_at>#<id>"   Lookup by payment id
//	PK "evt#<digest(id)>"     SK "<started_at>#<id>"   Lookup by event id
//	PK "ppi#<digest(id)>"     SK "<started_at>#<id>"   Lookup by provider payment id
//	PK "inv#<digest(id)>"     SK "<started_at>#<id>"   Lookup by invoice
//
// A lookup key is filed under a digest of its exact value (indexPK), never under its redacted
// form: redaction masks a numeric key that passes the Luhn check down to its last four digits,
// so two orders ending alike would share a lookup, and a cap would merge two long keys. The
// digest also keeps a value that looks like a card number out of the partition key. An
// idempotency key is filed with its caller's scope, so two callers' same key never meet.
//
// A refused (unverified) delivery is never filed under the ids it claims:
//
//	PK "ref#<yyyy-mm-dd>" SK "<started_at>#<id>"       Refused, by the day it came (ListRefused)
//	PK "clm#<sha256 of a claimed id>" SK "<started_at>#<id>"  a count, no content
//
// Every item carries the whole (redacted, capped) attempt, so a lookup is one query and no
// further reads. started_at is UTC with a fixed nine-digit fraction, so the sort key orders by
// time (RFC 3339 with trailing zeros trimmed would not).
const Table = "attempts"

// By names the key a Lookup searches on.
type By string

const (
	ByIdempotencyKey By = "idempotency_key"
	ByPaymentID      By = "payment_id"
	ByEventID        By = "event_id"
	// ByProviderPaymentID is the provider's object id (a PaymentIntent's pi_...).
	ByProviderPaymentID By = "provider_payment_id"
	ByInvoice           By = "invoice"
)

// Lookups are every By, in the order the operator API lists them.
var Lookups = []By{ByIdempotencyKey, ByPaymentID, ByEventID, ByProviderPaymentID, ByInvoice}

// prefix is the partition key prefix of each lookup key.
func (b By) prefix() (string, bool) {
	switch b {
	case ByIdempotencyKey:
		return "idem#", true
	case ByPaymentID:
		return "pay#", true
	case ByEventID:
		return "evt#", true
	case ByProviderPaymentID:
		return "ppi#", true
	case ByInvoice:
		return "inv#", true
	}
	return "", false
}

const (
	idItemSK = "attempt"
	skTime   = "2006-01-02T15:04:05.000000000Z"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("attempts: not found")
	// ErrInvalid means a lookup was malformed: an unknown By or an empty value.
	ErrInvalid = errors.New("attempts: invalid lookup")
	// ErrConfig means a size given to NewLog is out of range.
	ErrConfig = errors.New("attempts: invalid config")
)

// Defaults.
const (
	DefaultRetention = 30 * 24 * time.Hour
	DefaultBodyCap   = 8 << 10
	DefaultPageSize  = 50
	// MaxBodyCap keeps an attempt, stored four times, well inside DynamoDB's 400 KB item limit.
	MaxBodyCap = 64 << 10
)

// Log is the attempt log on a store.Store. Build it with NewLog, which checks the sizes and
// starts the id source once:
//
//	l, err := attempts.NewLog(attempts.Log{Store: s, Now: clock.Now})
//
// Zero values take the defaults.
type Log struct {
	Store store.Store
	// Retention is how long an attempt is kept (default 30 days); it sets the items' TTL.
	Retention time.Duration
	// BodyCap caps each stored body, after redaction (default 8 KiB, at most MaxBodyCap).
	BodyCap int
	// PageSize is the number of attempts a Lookup returns at most (default 50).
	PageSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// IDs is the id source for attempts that arrive without an ID (default NewIDs over Now).
	IDs func() string
}

// NewLog checks l's sizes and returns it ready to record.
func NewLog(l Log) (*Log, error) {
	switch {
	case l.Retention != 0 && l.Retention < time.Hour:
		return nil, fmt.Errorf("%w: retention %s is under an hour", ErrConfig, l.Retention)
	case l.BodyCap < 0 || l.BodyCap > MaxBodyCap:
		return nil, fmt.Errorf("%w: body cap %d", ErrConfig, l.BodyCap)
	case l.PageSize < 0 || l.PageSize > 100:
		return nil, fmt.Errorf("%w: page size %d (1-100)", ErrConfig, l.PageSize)
	}
	out := &l
	if out.IDs == nil {
		out.IDs = NewIDs(out.now)
	}
	return out, nil
}

func (l *Log) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

func (l *Log) retention() time.Duration {
	if l.Retention == 0 {
		return DefaultRetention
	}
	return l.Retention
}

func (l *Log) bodyCap() int {
	if l.BodyCap == 0 {
		return DefaultBodyCap
	}
	return l.BodyCap
}

func (l *Log) pageSize() int {
	if l.PageSize == 0 {
		return DefaultPageSize
	}
	return l.PageSize
}

// NewIDs returns the default id source: "att_" + the clock in hex nanoseconds + a tag drawn
// once per source + a counter. Ids sort by creation time within one process; the tag keeps
// two processes (two Lambda instances) from colliding in the same nanosecond.
func NewIDs(now func() time.Time) func() string {
	var tag [4]byte
	_, _ = rand.Read(tag[:]) // crypto/rand: never fails on supported platforms
	t := hex.EncodeToString(tag[:])
	var n atomic.Uint64
	return func() string {
		return "att_" + strconv.FormatInt(now().UnixNano(), 16) + t + strconv.FormatUint(n.Add(1), 16)
	}
}

// Record stores a, redacted and capped, findable by its id and by each lookup key it has. An
// attempt without an ID gets one; one without StartedAt is stamped now.
//
// Its items are written with store.Store.PutAll, not as a transaction: each stands alone, and
// DynamoDB bills a batch half what it bills a transaction, on the table that takes the most
// writes per payment (docs/capacity.md). Recording an attempt again writes the same items
// again, so a caller may retry a Record that failed or timed out; ids are unique by
// construction (NewIDs), so two attempts never share one.
//
// Callers that make payments must not fail because recording failed: log the error and go on
// (see BestEffort).
func (l *Log) Record(ctx context.Context, a Attempt) error {
	a, its, err := l.items(a)
	if err != nil {
		return err
	}
	if err := l.Store.PutAll(ctx, Table, its...); err != nil {
		return fmt.Errorf("attempts: record %s: %w", a.ID, err)
	}
	return nil
}

// maxItems is the most items one store.Store.PutAll call takes.
const maxItems = 100

// RecordAll stores as, each as Record would, in as few store calls as fit: many attempts share
// one commit. When a call fails (a store error, or one attempt given twice), its attempts are
// recorded one by one, so one attempt never keeps the others out; the errors of those that
// still fail are joined.
func (l *Log) RecordAll(ctx context.Context, as []Attempt) error {
	var errs []error
	var chunk []Attempt
	var its []store.Item
	flush := func() {
		if len(its) == 0 {
			return
		}
		if err := l.Store.PutAll(ctx, Table, its...); err != nil {
			for _, a := range chunk {
				errs = append(errs, l.Record(ctx, a))
			}
		}
		chunk, its = chunk[:0], its[:0]
	}
	for _, a := range as {
		a, it, err := l.items(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(its)+len(it) > maxItems {
			flush()
		}
		chunk, its = append(chunk, a), append(its, it...)
	}
	flush()
	return errors.Join(errs...)
}

// items is what Record stores for a, and a as given with its id and time stamped (not
// redacted: recording it again files it under the same keys).
func (l *Log) items(a Attempt) (Attempt, []store.Item, error) {
	if a.ID == "" {
		a.ID = l.IDs()
	}
	if a.StartedAt.IsZero() {
		a.StartedAt = l.now()
	}
	a.StartedAt = a.StartedAt.UTC()
	given := a
	claims := a.Claimed    // hashed whole, before the cap, so a lookup of the whole id counts them
	keys := a.lookupKeys() // filed by their exact values, before redaction and the cap
	if a.IsReplay() && a.IdempotencyKey != "" && !a.Refused {
		return given, []store.Item{l.replayItem(a)}, nil
	}
	a = a.Redacted(l.bodyCap())
	doc, err := json.Marshal(a)
	if err != nil {
		return given, nil, fmt.Errorf("attempts: encode %s: %w", a.ID, err)
	}
	expires := a.StartedAt.Add(l.retention()).Unix()
	its := []store.Item{{PK: "att#" + a.ID, SK: idItemSK, Doc: doc, ExpiresAt: expires}}
	// The lookup items carry the attempt without headers and bodies: enough to answer "was
	// this delivered?" from one query, while the full attempt is stored once (Get).
	sum := a.Summary()
	sumDoc, err := json.Marshal(sum)
	if err != nil {
		return given, nil, fmt.Errorf("attempts: encode %s: %w", a.ID, err)
	}
	sk := a.StartedAt.Format(skTime) + "#" + a.ID
	item := func(pk string, doc []byte) store.Item {
		return store.Item{PK: pk, SK: sk, Doc: doc, ExpiresAt: expires}
	}
	if a.Refused {
		// Quarantine: filed by when it came, never under what it claims. Each claimed id gets
		// an empty marker under its hash (fixed length, whatever was claimed), so a lookup of
		// that id can say how many unverified deliveries claimed it and show none of them.
		its = append(its, item(refusedPK(a.StartedAt), sumDoc))
		seen := map[string]bool{}
		for _, c := range claims {
			if c == "" || seen[c] {
				continue
			}
			seen[c] = true
			its = append(its, item(claimPK(c), []byte("{}")))
		}
	} else {
		for _, k := range keys {
			if k.value == "" {
				continue
			}
			its = append(its, item(indexPK(k.by, k.scope, k.value), sumDoc))
		}
	}
	return given, its, nil
}

// replayItem files an exchange answered from an idempotency record (a replay) as one summary
// under the caller's key, and nothing else: no whole attempt and no other lookup. Its answer
// is the stored answer of the key's first exchange, byte for byte, and its request matched
// that exchange's fingerprint; the first exchange is stored whole and under every lookup. A
// replay changes nothing and sends nothing, so the key's lookup (where a client's retries
// belong) is the one place it adds anything: that it came, when, and what it was told.
// Written at a place of its own in a large table, each lookup item costs a page of the
// store; one is the least that keeps every replay findable.
func (l *Log) replayItem(a Attempt) store.Item {
	sum := a.Summary().Redacted(l.bodyCap()) // headers and bodies dropped before redaction
	doc, err := json.Marshal(sum)
	if err != nil { // an Attempt always encodes; keep the key findable regardless
		doc = []byte(`{}`)
	}
	return store.Item{PK: indexPK(ByIdempotencyKey, a.Scope, a.IdempotencyKey),
		SK: a.StartedAt.Format(skTime) + "#" + a.ID, Doc: doc, ExpiresAt: a.StartedAt.Add(l.retention()).Unix()}
}

// Page is one page of a Lookup, newest first. Cursor is "" on the last page.
type Page struct {
	Attempts []Attempt `json:"attempts"`
	Cursor   string    `json:"cursor,omitempty"`
	// UnverifiedClaims counts the refused deliveries that claimed the id looked up (at most
	// 100), none of which is in Attempts; Notice says so in words.
	UnverifiedClaims int    `json:"unverified_claims,omitempty"`
	Notice           string `json:"notice,omitempty"`
}

// Lookup answers "was this delivered?": every attempt recorded under the idempotency key,
// payment id or event id, newest first, one page at a time ("" starts; pass Page.Cursor to
// continue), as summaries without headers and bodies (Get has those). Attempts past their
// retention are left out even if the store still holds them. By idempotency key it finds the
// keys filed with no scope (the provider keys of outbound calls); LookupKey finds a caller's.
func (l *Log) Lookup(ctx context.Context, by By, value, cursor string) (Page, error) {
	return l.lookup(ctx, by, "", value, cursor)
}

// LookupKey is Lookup by a caller's own Idempotency-Key in that caller's scope: the requests
// the caller made with it, and no other caller's.
func (l *Log) LookupKey(ctx context.Context, scope, key, cursor string) (Page, error) {
	return l.lookup(ctx, ByIdempotencyKey, scope, key, cursor)
}

func (l *Log) lookup(ctx context.Context, by By, scope, value, cursor string) (Page, error) {
	if _, ok := by.prefix(); !ok || value == "" {
		return Page{}, fmt.Errorf("%w: by %q", ErrInvalid, by)
	}
	page, err := l.query(ctx, indexPK(by, scope, value), cursor)
	if err != nil {
		return Page{}, fmt.Errorf("attempts: lookup %s: %w", by, err)
	}
	if cursor == "" && by != ByIdempotencyKey && by != ByInvoice {
		// Refused deliveries that claimed this id: a count only.
		if page.UnverifiedClaims, err = l.countClaims(ctx, value); err != nil {
			return Page{}, fmt.Errorf("attempts: lookup %s: %w", by, err)
		}
		if page.UnverifiedClaims > 0 {
			page.Notice = UnverifiedNotice
		}
	}
	return page, nil
}

// UnverifiedNotice is what a lookup says of refused deliveries that claimed the id looked up.
const UnverifiedNotice = "An unverified delivery claimed this id; it was refused and is not shown here."

// maxClaimCount bounds the count of unverified claims a lookup reports ("100 or more").
const maxClaimCount = 100

func (l *Log) countClaims(ctx context.Context, id string) (int, error) {
	res, err := l.Store.Query(ctx, store.Query{Table: Table, PK: claimPK(id), Limit: maxClaimCount})
	if err != nil {
		return 0, err
	}
	now := l.now().Unix()
	n := 0
	for _, it := range res.Items {
		if !lapsed(it, now) {
			n++
		}
	}
	return n, nil
}

// ListRefused lists the refused deliveries that arrived on day (UTC), newest first.
func (l *Log) ListRefused(ctx context.Context, day time.Time, cursor string) (Page, error) {
	page, err := l.query(ctx, refusedPK(day), cursor)
	if err != nil {
		return Page{}, fmt.Errorf("attempts: refused: %w", err)
	}
	return page, nil
}

// indexPK is the partition a lookup key is filed under: its kind's prefix and a digest of
// the exact scope and value (scope is "" except for a caller's idempotency key).
func indexPK(by By, scope, value string) string {
	p, _ := by.prefix()
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return p + hex.EncodeToString(h.Sum(nil))
}

func refusedPK(t time.Time) string { return "ref#" + t.UTC().Format("2006-01-02") }

func claimPK(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "clm#" + hex.EncodeToString(sum[:])
}

func (l *Log) query(ctx context.Context, pk, cursor string) (Page, error) {
	res, err := l.Store.Query(ctx, store.Query{Table: Table, PK: pk, Desc: true, Limit: l.pageSize(), Cursor: cursor})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return Page{}, err
	}
	now := l.now().Unix()
	page := Page{Cursor: res.Cursor, Attempts: make([]Attempt, 0, len(res.Items))}
	for _, it := range res.Items {
		if lapsed(it, now) {
			continue
		}
		var a Attempt
		if err := json.Unmarshal(it.Doc, &a); err != nil {
			return Page{}, fmt.Errorf("attempts: decode %s/%s: %w", it.PK, it.SK, err)
		}
		page.Attempts = append(page.Attempts, a)
	}
	return page, nil
}

// Get returns one attempt by id, or ErrNotFound.
func (l *Log) Get(ctx context.Context, id string) (Attempt, error) {
	if id == "" {
		return Attempt{}, fmt.Errorf("%w: empty id", ErrInvalid)
	}
	it, err := l.Store.Get(ctx, Table, "att#"+id, idItemSK)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Attempt{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case errors.Is(err, store.ErrInvalid):
		return Attempt{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return Attempt{}, fmt.Errorf("attempts: get %s: %w", id, err)
	}
	if lapsed(it, l.now().Unix()) {
		return Attempt{}, fmt.Errorf("%w: %s (expired)", ErrNotFound, id)
	}
	var a Attempt
	if err := json.Unmarshal(it.Doc, &a); err != nil {
		return Attempt{}, fmt.Errorf("attempts: decode %s: %w", id, err)
	}
	return a, nil
}

func lapsed(it store.Item, now int64) bool { return it.ExpiresAt != 0 && it.ExpiresAt < now }

// RecordFunc records an attempt and reports nothing: what BestEffort returns, and what the
// capture helpers call.
type RecordFunc func(ctx context.Context, a Attempt)

// BestEffort wraps rec so that a failure to record is logged (the attempt's id, direction,
// provider, operation and lookup keys; never headers or bodies) and otherwise ignored: the
// payment that was attempted matters more than its log. A nil logger means slog.Default().
func BestEffort(rec Recorder, log *slog.Logger) RecordFunc {
	if log == nil {
		log = slog.Default()
	}
	store := func(ctx context.Context, a Attempt) {
		if err := rec.Record(ctx, a); err != nil {
			// Every field can come from outside (a claimed id, a caller's key): capped.
			log.LogAttrs(ctx, slog.LevelError, "attempt not recorded",
				slog.String("error", redact.CapLog(err.Error())),
				slog.String("attempt_id", redact.CapLog(a.ID)),
				slog.String("direction", redact.CapLog(string(a.Direction))),
				slog.String("provider", redact.CapLog(a.Provider)),
				slog.String("operation", redact.CapLog(a.Operation)),
				slog.String("idempotency_key", redact.CapLog(a.IdempotencyKey)),
				slog.String("payment_id", redact.CapLog(a.PaymentID)),
				slog.String("event_id", redact.CapLog(a.EventID)),
				slog.String("correlation_id", redact.CapLog(a.CorrelationID)),
				slog.String("outcome", redact.CapLog(a.Result)),
			)
		}
	}
	return func(ctx context.Context, a Attempt) {
		if p := pendingOf(ctx); p != nil {
			// Made while serving an API request: stored beside the request's own writes,
			// and its answer waits for it (API).
			p.start(ctx, func(ctx context.Context) { store(ctx, a) })
			return
		}
		store(ctx, a)
	}
}
