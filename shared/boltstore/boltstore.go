package boltstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
	"github.com/runtwice/twice/shared/store"
)

var _ store.Store = (*Store)(nil)

// maxTransact matches DynamoDB's TransactWriteItems limit, so code that runs locally also runs
// in AWS.
const maxTransact = 100

// defaultPage is the page size of a Query without a Limit.
const defaultPage = 100

// Store is a store.Store on a bbolt file.
type Store struct {
	db *bolt.DB
	// commits is the file's group committer (shared/boltgroup), which the local stack shares
	// with the queue and the runner's checkpoints.
	commits *boltgroup.Committer
	// stopTrim ends the background trimming; nil when none runs.
	stopTrim func()
	// writes counts the committed writes per table (Writes).
	writes sync.Map // string -> *atomic.Int64
}

// A store opened with Open is trimmed (see Trim) by the process's one trimmer, which looks at
// the process's file-backed resident memory every trimCheckEvery and, when it has grown by
// TrimAbove since the last trim, trims every store it keeps: the resident set then stays near
// TrimAbove plus what is touched in one interval, whatever the files' sizes. A trim costs a
// minor fault on the next read of every page, the tree's hot branch pages included: at 32 MB
// the local stack under load trimmed about seven times a second, and a third of its CPU went
// to those faults (docs/performance.md).
const trimCheckEvery = 50 * time.Millisecond

// TrimAbove is the growth that makes the trimmer trim, in bytes. Set it before the first
// store opens (infra/local's -trim-above); more trades resident memory for speed under load.
var TrimAbove int64 = 64 << 20

// PageSize is the page size of a file Open creates; a file keeps the size it was created with.
// Most of a commit's pages are the leaf and branches above an item at a random key, and bbolt
// writes each dirty page with a call of its own: 16 KB pages make the trees shallower and a
// commit's writes about half as many as the operating system's 4 KB, which made the local
// stack's replays and new payments faster (docs/performance.md); 64 KB pages were slower again.
const PageSize = 16 << 10

// Open opens (creating if needed) the bbolt file at path and starts its committer. Another
// process holding the file makes Open fail after a second rather than wait forever.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		PageSize:       PageSize,
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := New(db)
	s.stopTrim = KeepTrimmed(db)
	return s, nil
}

// KeepTrimmed adds db to the process's trimmer until the returned stop is called (before db is
// closed). One trimmer for every file of the process: it watches the process's growth, which
// every file's pages make together, and trims them all at once, so two stores in one process
// (the stack's and the simulator's) do not each trim at the other's growth. Growth, not the
// total, so that the program's own code pages and other files do not make it trim a small
// store over and over.
func KeepTrimmed(db *bolt.DB) (stop func()) {
	trimmer.mu.Lock()
	defer trimmer.mu.Unlock()
	if trimmer.dbs == nil {
		trimmer.dbs = map[*bolt.DB]bool{}
	}
	trimmer.dbs[db] = true
	if len(trimmer.dbs) == 1 {
		trimmer.quit, trimmer.done = make(chan struct{}), make(chan struct{})
		go trimLoop(trimmer.quit, trimmer.done)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			trimmer.mu.Lock()
			delete(trimmer.dbs, db)
			var quit, done chan struct{}
			if len(trimmer.dbs) == 0 {
				quit, done = trimmer.quit, trimmer.done
			}
			trimmer.mu.Unlock()
			if quit != nil {
				close(quit)
				<-done
			}
		})
	}
}

// trimmer is the process's one trimming loop and the databases it keeps. A database is trimmed
// under trimmer.mu, so its stop cannot return (and the caller close it) while it is advised.
var trimmer struct {
	mu         sync.Mutex
	dbs        map[*bolt.DB]bool
	quit, done chan struct{}
}

func trimLoop(quit, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(trimCheckEvery)
	defer t.Stop()
	base := mappedResident()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			if mappedResident() <= base+TrimAbove {
				continue
			}
			trimmer.mu.Lock()
			for db := range trimmer.dbs {
				_ = Trim(db)
			}
			trimmer.mu.Unlock()
			base = mappedResident()
		}
	}
}

// New wraps an open bbolt database, so the local stack can share one file between the store
// and other embedded components. Close stops the committer and closes db.
func New(db *bolt.DB) *Store {
	return &Store{db: db, commits: boltgroup.New(db, boltgroup.Options{})}
}

// Committer is the store's group committer: the other writers of the same file (the local
// queue, the runner's checkpoints) commit through it, so their fsyncs are shared.
func (s *Store) Committer() *boltgroup.Committer { return s.commits }

// DB returns the underlying bbolt database.
func (s *Store) DB() *bolt.DB { return s.db }

// Writes reports the bbolt keys the store's committed writes have put or deleted since it was
// opened, per bucket: "<table>" for items and "<table> index" for their index entries (a
// rewrite of an indexed item counts two there: its old entry's delete and its new one's put).
// A write whose condition failed changes nothing and counts nothing. With the pages a commit
// writes (boltgroup's Stats and bbolt's TxStats), this says which table's keys the disk's time
// goes to: a key at a random place in its tree dirties a page of its own
// (docs/performance.md).
func (s *Store) Writes() map[string]int64 {
	out := map[string]int64{}
	s.writes.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (s *Store) count(bucket string, n int64) {
	if n == 0 {
		return
	}
	c, ok := s.writes.Load(bucket)
	if !ok {
		c, _ = s.writes.LoadOrStore(bucket, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(n)
}

// counted adds ws, committed over olds, to Writes.
func (s *Store) counted(ws []store.Write, olds []*store.Item) {
	for i, w := range ws {
		s.count(w.Table, 1)
		var idx int64
		if w.Put != nil && w.Put.IndexPK != "" {
			idx++
		}
		if olds[i] != nil && olds[i].IndexPK != "" {
			idx++
		}
		s.count(w.Table+" index", idx)
	}
}

// Close waits for queued writes, then closes the file.
func (s *Store) Close() error {
	if s.stopTrim != nil {
		s.stopTrim()
	}
	_ = s.commits.Close()
	return s.db.Close()
}

func (s *Store) submit(ctx context.Context, apply boltgroup.Apply) error {
	err := s.commits.Submit(ctx, apply)
	if errors.Is(err, boltgroup.ErrClosed) {
		return errors.New("boltstore: store closed")
	}
	return err
}

// Get implements store.Store.
func (s *Store) Get(_ context.Context, table, pk, sk string) (store.Item, error) {
	if err := checkKey(pk, sk); err != nil {
		return store.Item{}, err
	}
	var it store.Item
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(dataBucket(table))
		if b == nil {
			return nil
		}
		v := b.Get(itemKey(pk, sk))
		if v == nil {
			return nil
		}
		found = true
		var err error
		it, err = decode(v)
		return err
	})
	if err != nil {
		return store.Item{}, err
	}
	if !found {
		return store.Item{}, store.ErrNotFound
	}
	return it, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	return s.Transact(ctx, store.Write{Table: table, Put: &it, Cond: c})
}

// Replace implements store.Store.
func (s *Store) Replace(ctx context.Context, table string, it store.Item, c store.Cond) (*store.Item, error) {
	olds, err := s.transact(ctx, []store.Write{{Table: table, Put: &it, Cond: c}})
	if err != nil {
		return nil, err
	}
	return olds[0], nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, table, pk, sk string, c store.Cond) error {
	return s.Transact(ctx, store.Write{Table: table, Delete: &store.Key{PK: pk, SK: sk}, Cond: c})
}

// Transact implements store.Store.
func (s *Store) Transact(ctx context.Context, ws ...store.Write) error {
	_, err := s.transact(ctx, ws)
	return err
}

// PutAll implements store.Store. The embedded store commits the items together, which is all
// the contract asks and more.
func (s *Store) PutAll(ctx context.Context, table string, items ...store.Item) error {
	ws := make([]store.Write, len(items))
	for i := range items {
		ws[i] = store.Write{Table: table, Put: &items[i]}
	}
	return s.Transact(ctx, ws...)
}

// transact commits ws and returns the items they replaced.
func (s *Store) transact(ctx context.Context, ws []store.Write) ([]*store.Item, error) {
	if err := validate(ws); err != nil {
		return nil, err
	}
	// A condition that already fails needs no write transaction: a failed conditional write
	// changes nothing, so reading the latest committed state is a valid point for it to happen.
	// This keeps duplicates (an idempotency replay) off the single writer. Only creations are
	// checked ahead: they are what duplicates fail; version conditions almost always hold, and
	// checking them twice would cost every commit a read.
	if err := s.precheck(ws); err != nil {
		return nil, err
	}
	// Copy the items: the caller may reuse them once we return, but the committer runs later.
	enc := make([][]byte, len(ws))
	for i, w := range ws {
		if w.Put != nil {
			enc[i] = encode(*w.Put)
		}
	}
	olds := make([]*store.Item, len(ws))
	err := s.submit(ctx, func(tx *bolt.Tx) (error, error) {
		// Check every condition before the first write: all or nothing.
		for i, w := range ws {
			pk, sk := writeKey(w)
			old, err := getItem(tx, w.Table, pk, sk)
			if err != nil {
				return nil, err
			}
			if !w.Cond.Holds(old) {
				return &store.ConditionError{Index: i, Old: old}, nil
			}
			olds[i] = old
		}
		for i, w := range ws {
			if err := apply(tx, w, enc[i], olds[i]); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	s.counted(ws, olds)
	return olds, nil
}

func (s *Store) precheck(ws []store.Write) error {
	creates := false
	for _, w := range ws {
		creates = creates || w.Cond.Kind == store.NotExists || w.Cond.Kind == store.NotExistsOrLapsed
	}
	if !creates {
		return nil
	}
	return s.db.View(func(tx *bolt.Tx) error {
		for i, w := range ws {
			if w.Cond.Kind == store.Always {
				continue
			}
			pk, sk := writeKey(w)
			old, err := getItem(tx, w.Table, pk, sk)
			if err != nil {
				return err
			}
			if !w.Cond.Holds(old) {
				return &store.ConditionError{Index: i, Old: old}
			}
		}
		return nil
	})
}

func validate(ws []store.Write) error {
	if len(ws) == 0 || len(ws) > maxTransact {
		return fmt.Errorf("%w: %d writes in one transaction (1 to %d)", store.ErrInvalid, len(ws), maxTransact)
	}
	seen := make(map[string]bool, len(ws))
	for i, w := range ws {
		if (w.Put == nil) == (w.Delete == nil) {
			return fmt.Errorf("%w: write %d must have exactly one of Put and Delete", store.ErrInvalid, i)
		}
		if w.Table == "" {
			return fmt.Errorf("%w: write %d has no table", store.ErrInvalid, i)
		}
		pk, sk := writeKey(w)
		if err := checkKey(pk, sk); err != nil {
			return err
		}
		k := w.Table + "\x00" + pk + "\x00" + sk
		if seen[k] {
			return fmt.Errorf("%w: two writes to %s/%q/%q in one transaction", store.ErrInvalid, w.Table, pk, sk)
		}
		seen[k] = true
	}
	return nil
}

func checkKey(pk, sk string) error {
	if pk == "" {
		return fmt.Errorf("%w: empty partition key", store.ErrInvalid)
	}
	if strings.IndexByte(pk, 0) >= 0 || strings.IndexByte(sk, 0) >= 0 {
		return fmt.Errorf("%w: key contains a NUL byte", store.ErrInvalid)
	}
	return nil
}

func writeKey(w store.Write) (pk, sk string) {
	if w.Put != nil {
		return w.Put.PK, w.Put.SK
	}
	return w.Delete.PK, w.Delete.SK
}

func getItem(tx *bolt.Tx, table, pk, sk string) (*store.Item, error) {
	b := tx.Bucket(dataBucket(table))
	if b == nil {
		return nil, nil
	}
	v := b.Get(itemKey(pk, sk))
	if v == nil {
		return nil, nil
	}
	it, err := decode(v)
	if err != nil {
		return nil, err
	}
	return &it, nil
}

func apply(tx *bolt.Tx, w store.Write, enc []byte, old *store.Item) error {
	data, err := tx.CreateBucketIfNotExists(dataBucket(w.Table))
	if err != nil {
		return err
	}
	idx, err := tx.CreateBucketIfNotExists(indexBucket(w.Table))
	if err != nil {
		return err
	}
	if old != nil && old.IndexPK != "" {
		if err := idx.Delete(indexKey(*old)); err != nil {
			return err
		}
	}
	pk, sk := writeKey(w)
	if w.Delete != nil {
		return data.Delete(itemKey(pk, sk))
	}
	if err := data.Put(itemKey(pk, sk), enc); err != nil {
		return err
	}
	if w.Put.IndexPK != "" {
		return idx.Put(indexKey(*w.Put), itemKey(pk, sk))
	}
	return nil
}

// Query implements store.Store.
func (s *Store) Query(_ context.Context, q store.Query) (store.Page, error) {
	if q.PK == "" || strings.IndexByte(q.PK, 0) >= 0 {
		return store.Page{}, fmt.Errorf("%w: query needs a partition key without NUL", store.ErrInvalid)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultPage
	}
	var after []byte
	if q.Cursor != "" {
		var err error
		if after, err = base64.RawURLEncoding.DecodeString(q.Cursor); err != nil {
			return store.Page{}, fmt.Errorf("%w: bad cursor", store.ErrInvalid)
		}
	}
	prefix := append([]byte(q.PK), 0)
	lo := append(bytes.Clone(prefix), q.SKFrom...)
	var hi []byte // inclusive upper bound on the sort-key part
	if q.SKTo != "" {
		hi = append(bytes.Clone(prefix), q.SKTo...)
	}
	var page store.Page
	err := s.db.View(func(tx *bolt.Tx) error {
		name := dataBucket(q.Table)
		if q.Index {
			name = indexBucket(q.Table)
		}
		b := tx.Bucket(name)
		if b == nil {
			return nil
		}
		data := tx.Bucket(dataBucket(q.Table))
		// inRange reports whether k (a full bucket key) has the partition and a sort key within
		// [SKFrom, SKTo]. Index keys carry the item key after the sort key; compare the sort-key
		// part only.
		sortPart := func(k []byte) []byte {
			rest := k[len(prefix):]
			if q.Index {
				if i := bytes.IndexByte(rest, 0); i >= 0 {
					rest = rest[:i]
				}
			}
			return rest
		}
		c := b.Cursor()
		var k, v []byte
		switch {
		case !q.Desc && after != nil:
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		case !q.Desc:
			k, v = c.Seek(lo)
		default:
			start := after
			if start == nil {
				// Position after the last key of the range, then step back.
				if hi != nil {
					start = append(bytes.Clone(hi), 0xff)
				} else {
					start = append(bytes.Clone(prefix[:len(prefix)-1]), 1)
				}
			}
			k, v = c.Seek(start)
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, start) >= 0 {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = step(c, q.Desc) {
			if !bytes.HasPrefix(k, prefix) {
				break
			}
			// Descending scans start just above SKTo and may meet longer sort keys that share
			// its prefix (SKTo "c", key "ca"): skip those; below SKFrom ends the scan.
			if sp := string(sortPart(k)); q.SKTo != "" && sp > q.SKTo {
				if q.Desc {
					continue
				}
				break
			} else if q.SKFrom != "" && sp < q.SKFrom {
				if q.Desc {
					break
				}
				continue
			}
			if len(page.Items) == limit {
				page.Cursor = base64.RawURLEncoding.EncodeToString(lastKey(page, q, prefix))
				break
			}
			raw := v
			if q.Index {
				raw = data.Get(v)
				if raw == nil {
					continue
				}
			}
			it, err := decode(raw)
			if err != nil {
				return err
			}
			page.Items = append(page.Items, it)
		}
		return nil
	})
	return page, err
}

func step(c *bolt.Cursor, desc bool) ([]byte, []byte) {
	if desc {
		return c.Prev()
	}
	return c.Next()
}

// lastKey is the bucket key of the page's last item: where the next page continues.
func lastKey(p store.Page, q store.Query, prefix []byte) []byte {
	last := p.Items[len(p.Items)-1]
	if q.Index {
		return indexKey(last)
	}
	return itemKey(last.PK, last.SK)
}

func dataBucket(table string) []byte  { return []byte("t:" + table) }
func indexBucket(table string) []byte { return []byte("i:" + table) }

func itemKey(pk, sk string) []byte {
	k := make([]byte, 0, len(pk)+1+len(sk))
	k = append(k, pk...)
	k = append(k, 0)
	return append(k, sk...)
}

func indexKey(it store.Item) []byte {
	k := make([]byte, 0, len(it.IndexPK)+len(it.IndexSK)+len(it.PK)+len(it.SK)+3)
	k = append(k, it.IndexPK...)
	k = append(k, 0)
	k = append(k, it.IndexSK...)
	k = append(k, 0)
	k = append(k, it.PK...)
	k = append(k, 0)
	return append(k, it.SK...)
}

// encode lays an item out as uvarint-prefixed fields; version 1 of the format.
func encode(it store.Item) []byte {
	b := make([]byte, 0, 1+len(it.PK)+len(it.SK)+len(it.Doc)+len(it.IndexPK)+len(it.IndexSK)+40)
	b = append(b, 1)
	for _, s := range [][]byte{[]byte(it.PK), []byte(it.SK), it.Doc, []byte(it.IndexPK), []byte(it.IndexSK)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, it.Version)
	b = binary.AppendVarint(b, it.LockExpiresAt)
	return binary.AppendVarint(b, it.ExpiresAt)
}

var errCorrupt = errors.New("boltstore: corrupt item")

func decode(b []byte) (store.Item, error) {
	if len(b) == 0 || b[0] != 1 {
		return store.Item{}, errCorrupt
	}
	b = b[1:]
	var fields [5][]byte
	for i := range fields {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return store.Item{}, errCorrupt
		}
		fields[i] = b[w : w+int(n)]
		b = b[w+int(n):]
	}
	var nums [3]int64
	for i := range nums {
		v, w := binary.Varint(b)
		if w <= 0 {
			return store.Item{}, errCorrupt
		}
		nums[i] = v
		b = b[w:]
	}
	return store.Item{
		PK: string(fields[0]), SK: string(fields[1]), Doc: bytes.Clone(fields[2]),
		IndexPK: string(fields[3]), IndexSK: string(fields[4]),
		Version: nums[0], LockExpiresAt: nums[1], ExpiresAt: nums[2],
	}, nil
}
