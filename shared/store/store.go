package store

import (
	"context"
	"errors"
	"fmt"
)

// Item is one stored record.
//
// Tables are logical names ("idempotency", "payments", ...); an implementation maps them to
// physical tables. A table whose items carry a SK has a sort key; one whose items leave SK
// empty is keyed by PK alone. Callers never mix the two in one table.
type Item struct {
	PK string
	SK string

	// Doc is the record itself, a JSON document the store never interprets.
	Doc []byte

	// Version is a caller-managed counter that conditions can compare: an ordering guard
	// (apply only newer versions) or a fencing token (commit only if nobody took over).
	Version int64

	// LockExpiresAt is the unix second after which an in-progress lock may be taken over;
	// zero means no lock.
	LockExpiresAt int64

	// ExpiresAt is the unix second after which the item is dead (the DynamoDB TTL attribute);
	// zero means never. Stores may keep an expired item for a while (DynamoDB deletes within
	// days, DynamoDB Local never): reads still return it, and callers decide with the clock
	// they were given. Conditions treat it as absent through NotExistsOrLapsed.
	ExpiresAt int64

	// IndexPK and IndexSK place the item in the table's secondary index ("gsi1"); empty
	// IndexPK leaves it out. Index queries are eventually consistent in DynamoDB.
	IndexPK string
	IndexSK string
}

// Key names one item.
type Key struct {
	Table string
	PK    string
	SK    string
}

// CondKind says what must hold for a write to go ahead.
type CondKind int

const (
	// Always writes unconditionally.
	Always CondKind = iota
	// NotExists writes only if no item has the key.
	NotExists
	// Exists writes only if an item has the key.
	Exists
	// NotExistsOrLapsed writes if no item has the key, or the item's lock expired before Now
	// (LockExpiresAt != 0 && LockExpiresAt < Now), or the item itself expired before Now
	// (ExpiresAt != 0 && ExpiresAt < Now).
	NotExistsOrLapsed
	// VersionBelow writes if no item has the key or its Version is below Cond.Version: the
	// ordering guard that ignores an older event.
	VersionBelow
	// VersionIs writes only if an item has the key and its Version equals Cond.Version: the
	// fencing token that keeps a lock holder that lost its lock from committing.
	VersionIs
)

// Cond is the condition on one write.
type Cond struct {
	Kind    CondKind
	Now     int64 // unix seconds, for NotExistsOrLapsed
	Version int64 // for VersionBelow and VersionIs
}

// Write is one put or delete in a Transact call. Exactly one of Put and Delete is set.
type Write struct {
	Table  string
	Put    *Item
	Delete *Key // Delete.Table is ignored; Table names the table
	Cond   Cond
}

// Query reads items of one partition, or of one partition of the secondary index, in sort-key
// order.
type Query struct {
	Table string
	// Index queries IndexPK/IndexSK instead of PK/SK.
	Index bool
	PK    string
	// SKFrom and SKTo bound the sort key, both inclusive; empty means unbounded.
	SKFrom string
	SKTo   string
	// Desc returns the highest sort keys first.
	Desc bool
	// Limit caps the items returned; zero means the store's default page (100).
	Limit int
	// Cursor continues a previous query; "" starts at the beginning.
	Cursor string
}

// Page is one page of a query. Cursor is "" on the last page.
type Page struct {
	Items  []Item
	Cursor string
}

// Store is the durable store contract.
type Store interface {
	// Get returns the item with the key, or ErrNotFound. Reads are strongly consistent.
	Get(ctx context.Context, table, pk, sk string) (Item, error)
	// Put writes one item under a condition. When the condition fails it returns a
	// *ConditionError holding the item as it was, read in the same call.
	Put(ctx context.Context, table string, it Item, c Cond) error
	// Replace is Put that also returns the item it replaced (nil when there was none), in the
	// same single call (DynamoDB's ReturnValues ALL_OLD costs no read): how a caller learns it
	// took over an expired lock.
	Replace(ctx context.Context, table string, it Item, c Cond) (old *Item, err error)
	// Transact commits the writes atomically: all or none. When a condition fails it returns a
	// *ConditionError naming the first failed write and holding that item as it was. At most
	// 100 writes, and no two on the same key.
	Transact(ctx context.Context, ws ...Write) error
	// PutAll writes items to table, each one unconditionally, and not as one transaction:
	// when it fails, some of the items may be written, and writing them all again is
	// harmless. It is for items that stand alone, such as a log's entry and its lookups: in
	// DynamoDB it is BatchWriteItem, billed half what a transaction of the same items costs,
	// and an item the service leaves unprocessed (throttled) is sent again with the client's
	// backoff. At most 100 items, and no two on the same key.
	PutAll(ctx context.Context, table string, items ...Item) error
	// Delete removes an item under a condition; deleting a missing item with Always is not an
	// error.
	Delete(ctx context.Context, table, pk, sk string, c Cond) error
	// Query reads one page of a partition.
	Query(ctx context.Context, q Query) (Page, error)
}

// Sentinel errors. Implementations wrap their own errors around these so callers branch with
// errors.Is.
var (
	ErrNotFound = errors.New("store: not found")
	// ErrConditionFailed is what a *ConditionError matches with errors.Is.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrConflict means a concurrent transaction touched the same items (DynamoDB's
	// TransactionConflict); the caller may retry the whole operation.
	ErrConflict = errors.New("store: transaction conflict")
	// ErrInvalid means the request itself is malformed (empty key, duplicate key in one
	// transaction, too many writes).
	ErrInvalid = errors.New("store: invalid request")
	// ErrThrottled means the store refused the call for its rate (DynamoDB's throughput or
	// request limits) after its client's own retries: nothing was written, and the same call
	// can succeed later. Callers hand the work back (a 503 with Retry-After, a batch item
	// failure, an outbox message left due).
	ErrThrottled = errors.New("store: throttled")
)

// ConditionError reports a failed condition.
type ConditionError struct {
	// Index is the position of the failed write in a Transact call (0 for Put and Delete).
	Index int
	// Old is the item as it was when the condition was checked; nil if it did not exist.
	Old *Item
}

func (e *ConditionError) Error() string {
	if e.Old == nil {
		return fmt.Sprintf("store: condition failed on write %d (no item)", e.Index)
	}
	return fmt.Sprintf("store: condition failed on write %d (item %q/%q version %d)", e.Index, e.Old.PK, e.Old.SK, e.Old.Version)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionError) Is(target error) bool { return target == ErrConditionFailed }

// Holds reports whether c holds for the current item cur (nil when absent). Stores that
// evaluate conditions themselves (the embedded store) use it, so every store agrees on what a
// condition means.
func (c Cond) Holds(cur *Item) bool {
	switch c.Kind {
	case Always:
		return true
	case NotExists:
		return cur == nil
	case Exists:
		return cur != nil
	case NotExistsOrLapsed:
		return cur == nil ||
			(cur.LockExpiresAt != 0 && cur.LockExpiresAt < c.Now) ||
			(cur.ExpiresAt != 0 && cur.ExpiresAt < c.Now)
	case VersionBelow:
		return cur == nil || cur.Version < c.Version
	case VersionIs:
		return cur != nil && cur.Version == c.Version
	default:
		return false
	}
}
