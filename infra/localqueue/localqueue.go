package localqueue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
)

var (
	_ queue.Queue        = (*Queue)(nil)
	_ queue.BatchDeleter = (*Queue)(nil)
)

// Options configure a Broker.
type Options struct {
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// NewID makes message ids; defaults to crypto/rand.Text.
	NewID func() string
	// Logger records dead-lettering; defaults to slog.Default().
	Log *slog.Logger
	// Committer is the file's group committer (shared/boltgroup), shared with the file's other
	// writers (boltstore.Store.Committer); nil starts one of the broker's own.
	Committer *boltgroup.Committer
}

// Broker owns the queues that live in one bbolt file and the committer that writes them.
type Broker struct {
	db    *bolt.DB
	clock clock.Clock
	newID func() string
	log   *slog.Logger
	// commits is the group committer; own says the broker started it (and stops it).
	commits *boltgroup.Committer
	own     bool
	closed  chan struct{}

	mu     sync.Mutex
	queues map[string]*Queue
	stop   sync.Once
}

// New starts a Broker on db. The broker never closes db: the local stack shares the file with
// its store. db must not be opened with NoSync, or messages would not survive a crash.
func New(db *bolt.DB, opts Options) *Broker {
	b := &Broker{
		db: db, clock: opts.Clock, newID: opts.NewID, commits: opts.Committer,
		closed: make(chan struct{}), queues: make(map[string]*Queue),
	}
	if b.commits == nil {
		b.commits, b.own = boltgroup.New(db, boltgroup.Options{}), true
	}
	if b.clock == nil {
		b.clock = clock.Real()
	}
	if b.newID == nil {
		b.newID = rand.Text
	}
	b.log = opts.Log
	if b.log == nil {
		b.log = slog.Default()
	}
	return b
}

// Close ends every long poll with queue.ErrClosed and refuses further changes; a committer of
// the broker's own commits what is queued and stops. It leaves db open.
func (b *Broker) Close() error {
	b.stop.Do(func() {
		b.mu.Lock()
		close(b.closed)
		b.mu.Unlock()
		if b.own {
			_ = b.commits.Close()
		}
	})
	return nil
}

// Config is a queue's redrive policy.
type Config struct {
	// DeadLetter names the dead-letter queue; empty means none.
	DeadLetter string
	// MaxReceiveCount is how many receives a message gets before the next one moves it to the
	// dead-letter queue (SQS's maxReceiveCount, 1 to 1000).
	MaxReceiveCount int
}

// Queue returns the queue called name, creating it (and its dead-letter queue) if needed. The
// messages of a queue outlive the process; its Config is given anew on every start, as the
// template gives it to SQS.
func (b *Broker) Queue(name string, cfg Config) (*Queue, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty queue name", queue.ErrInvalid)
	}
	if cfg.DeadLetter != "" && (cfg.MaxReceiveCount < 1 || cfg.MaxReceiveCount > 1000 || cfg.DeadLetter == name) {
		return nil, fmt.Errorf("%w: redrive to %q after %d receives", queue.ErrInvalid, cfg.DeadLetter, cfg.MaxReceiveCount)
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		for _, n := range []string{name, cfg.DeadLetter} {
			if n == "" {
				continue
			}
			qb, err := tx.CreateBucketIfNotExists(bucketName(n))
			if err != nil {
				return err
			}
			for _, sub := range [][]byte{msgsBucket, visBucket} {
				if _, err := qb.CreateBucketIfNotExists(sub); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("localqueue: create %s: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queueLocked(name)
	var dlq *Queue
	if cfg.DeadLetter != "" {
		dlq = b.queueLocked(cfg.DeadLetter)
	}
	q.mu.Lock()
	q.cfg, q.dlq = cfg, dlq
	q.mu.Unlock()
	return q, nil
}

func (b *Broker) queueLocked(name string) *Queue {
	q := b.queues[name]
	if q == nil {
		q = &Queue{b: b, name: name, tag: nameTag(name), wake: make(chan struct{})}
		b.queues[name] = q
	}
	return q
}

// Queue is one durable local queue with SQS standard-queue semantics.
type Queue struct {
	b    *Broker
	name string
	tag  uint32
	cfg  Config
	dlq  *Queue

	mu   sync.Mutex    // guards cfg, dlq and wake
	wake chan struct{} // closed and replaced when messages may have become available
}

func (q *Queue) redrive() (Config, *Queue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cfg, q.dlq
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) notify() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

func (q *Queue) waiter() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// Send implements queue.Queue.
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	if err := queue.CheckSend(body, opts); err != nil {
		return "", err
	}
	now := q.b.clock.Now()
	rec := record{
		id: q.b.newID(), body: body, attrs: opts.Attributes,
		sentAt: now.UnixNano(), visibleAt: now.Add(opts.Delay).UnixNano(),
	}
	enc := rec.encode() // the caller may reuse body once Send returns
	err := q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
		qb, err := q.buckets(tx)
		if err != nil {
			return nil, err
		}
		return nil, qb.put(enc, rec.visibleAt)
	})
	if err != nil {
		return "", err
	}
	// Wake waiters even for a delayed message: they re-arm their timers for its due time.
	q.notify()
	return rec.id, nil
}

// Receive implements queue.Queue. It waits on the queue's Send notifications and on a clock
// timer for the next message to become visible, never on a polling loop.
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]queue.Message, error) {
	if err := queue.CheckReceive(max, visibility, wait); err != nil {
		return nil, err
	}
	deadline := q.b.clock.Now().Add(wait)
	for {
		woken := q.waiter()
		msgs, next, err := q.tryReceive(ctx, max, visibility)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		now := q.b.clock.Now()
		d := deadline.Sub(now)
		if d <= 0 {
			return nil, nil
		}
		if !next.IsZero() && next.Sub(now) < d {
			d = next.Sub(now)
		}
		t := q.b.clock.NewTimer(d)
		select {
		case <-woken:
		case <-t.C():
		case <-q.b.closed:
			t.Stop()
			return nil, queue.ErrClosed
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// tryReceive takes up to max visible messages in one transaction. next is when the earliest
// invisible message becomes visible (zero if none).
func (q *Queue) tryReceive(ctx context.Context, max int, visibility time.Duration) (msgs []queue.Message, next time.Time, err error) {
	// Most empty receives of a long poll find nothing: learn that from a read transaction and
	// keep them off the single writer.
	if due, nextAt, err := q.due(); err != nil || !due {
		if nextAt != 0 {
			next = time.Unix(0, nextAt)
		}
		return nil, next, err
	}
	cfg, dlq := q.redrive()
	var dead []deadLetter
	err = q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
		msgs, next, dead = nil, time.Time{}, nil
		qb, err := q.buckets(tx)
		if err != nil {
			return nil, err
		}
		now := q.b.clock.Now()
		hidden := now.Add(visibility).UnixNano()
		for len(msgs) < max {
			// Collect first, then change: bbolt cursors skip keys when their bucket changes.
			keys, nextAt := qb.visible(now.UnixNano(), 2*max)
			if nextAt != 0 {
				next = time.Unix(0, nextAt)
			}
			if len(keys) == 0 {
				break
			}
			for _, vk := range keys {
				if len(msgs) == max {
					break
				}
				seq := vk[8:]
				rec, err := decodeRecord(qb.msgs.Get(seq))
				if err != nil {
					return nil, err
				}
				if dlq != nil && rec.receiveCount >= uint64(cfg.MaxReceiveCount) {
					// SQS moves the message on the receive that would exceed maxReceiveCount.
					if err := qb.remove(seq, vk); err != nil {
						return nil, err
					}
					dq, err := dlq.buckets(tx)
					if err != nil {
						return nil, err
					}
					rec.visibleAt = now.UnixNano()
					if err := dq.put(rec.encode(), rec.visibleAt); err != nil {
						return nil, err
					}
					dead = append(dead, deadLetter{rec.id, rec.receiveCount})
					continue
				}
				rec.receiveCount++
				rec.visibleAt = hidden
				if err := qb.update(seq, vk, rec); err != nil {
					return nil, err
				}
				msgs = append(msgs, queue.Message{
					ID: rec.id, Body: rec.body, Attributes: rec.attrs,
					ReceiptHandle: receipt{tag: q.tag, seq: binary.BigEndian.Uint64(seq), count: rec.receiveCount}.String(),
					ReceiveCount:  int(rec.receiveCount), SentAt: time.Unix(0, rec.sentAt),
				})
			}
		}
		return nil, nil
	})
	if len(dead) > 0 && err == nil {
		for _, d := range dead {
			q.b.log.Info("message dead-lettered", "queue", q.name, "dead_letter_queue", dlq.name,
				"message_id", d.id, "receive_count", d.receiveCount)
		}
		dlq.notify()
	}
	return msgs, next, err
}

type deadLetter struct {
	id           string
	receiveCount uint64
}

// due reports whether a message is visible now, and if not when the next one will be.
func (q *Queue) due() (due bool, nextAt int64, err error) {
	err = q.b.db.View(func(tx *bolt.Tx) error {
		qb, err := q.buckets(tx)
		if err != nil {
			return err
		}
		keys, at := qb.visible(q.b.clock.Now().UnixNano(), 1)
		due, nextAt = len(keys) > 0, at
		return nil
	})
	return due, nextAt, err
}

// Delete implements queue.Queue. A receipt from an earlier receive of a message that has been
// received again fails with queue.ErrStaleReceipt and deletes nothing.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	r, err := q.parseReceipt(receiptHandle)
	if err != nil {
		return err
	}
	return q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
		qb, err := q.buckets(tx)
		if err != nil {
			return nil, err
		}
		seq := seqKey(r.seq)
		rec, vk, err := qb.get(seq)
		if err != nil || rec == nil {
			return nil, err // already gone: deleting twice is not an error
		}
		if rec.receiveCount != r.count {
			return queue.ErrStaleReceipt, nil
		}
		return nil, qb.remove(seq, vk)
	})
}

// DeleteBatch implements queue.BatchDeleter: the receipts are deleted in one commit, each with
// Delete's rules.
func (q *Queue) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	if len(receipts) == 0 || len(receipts) > queue.MaxBatch {
		return nil, fmt.Errorf("%w: %d receipts (1 to %d)", queue.ErrInvalid, len(receipts), queue.MaxBatch)
	}
	errs := make([]error, len(receipts))
	parsed := make([]receipt, len(receipts))
	for i, s := range receipts {
		parsed[i], errs[i] = q.parseReceipt(s)
	}
	err := q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
		qb, err := q.buckets(tx)
		if err != nil {
			return nil, err
		}
		for i, r := range parsed {
			if errs[i] != nil && !errors.Is(errs[i], queue.ErrStaleReceipt) {
				continue // malformed: never reached the store
			}
			errs[i] = nil // a retried group runs this again
			seq := seqKey(r.seq)
			rec, vk, err := qb.get(seq)
			if err != nil {
				return nil, err
			}
			switch {
			case rec == nil:
			case rec.receiveCount != r.count:
				errs[i] = queue.ErrStaleReceipt
			default:
				if err := qb.remove(seq, vk); err != nil {
					return nil, err
				}
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// ChangeVisibility implements queue.Queue.
func (q *Queue) ChangeVisibility(ctx context.Context, receiptHandle string, d time.Duration) error {
	if err := queue.CheckVisibility(d); err != nil {
		return err
	}
	r, err := q.parseReceipt(receiptHandle)
	if err != nil {
		return err
	}
	err = q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
		qb, err := q.buckets(tx)
		if err != nil {
			return nil, err
		}
		seq := seqKey(r.seq)
		rec, vk, err := qb.get(seq)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return fmt.Errorf("%w: message is gone", queue.ErrReceiptInvalid), nil
		}
		if rec.receiveCount != r.count {
			return queue.ErrStaleReceipt, nil
		}
		rec.visibleAt = q.b.clock.Now().Add(d).UnixNano()
		return nil, qb.update(seq, vk, *rec)
	})
	if err == nil {
		q.notify() // the message may now be due sooner than any waiter's timer
	}
	return err
}

// moveChunk is how many messages one MoveMessages transaction moves.
const moveChunk = 256

// MoveMessages moves up to max visible messages (all of them if max <= 0) from q to dst, the
// operator's retry of a dead-letter queue (SQS StartMessageMoveTask). Moved messages keep their
// id, body, attributes and sent time; their receive count starts again from zero.
func (q *Queue) MoveMessages(ctx context.Context, dst *Queue, max int) (int, error) {
	if dst == nil || dst == q || dst.b != q.b {
		return 0, fmt.Errorf("%w: move destination", queue.ErrInvalid)
	}
	moved := 0
	for max <= 0 || moved < max {
		chunk := moveChunk
		if max > 0 && max-moved < chunk {
			chunk = max - moved
		}
		n := 0
		err := q.b.submit(ctx, func(tx *bolt.Tx) (error, error) {
			n = 0
			src, err := q.buckets(tx)
			if err != nil {
				return nil, err
			}
			dq, err := dst.buckets(tx)
			if err != nil {
				return nil, err
			}
			now := q.b.clock.Now().UnixNano()
			keys, _ := src.visible(now, chunk)
			for _, vk := range keys {
				rec, err := decodeRecord(src.msgs.Get(vk[8:]))
				if err != nil {
					return nil, err
				}
				if err := src.remove(vk[8:], vk); err != nil {
					return nil, err
				}
				rec.receiveCount, rec.visibleAt = 0, now
				if err := dq.put(rec.encode(), now); err != nil {
					return nil, err
				}
				n++
			}
			return nil, nil
		})
		if err != nil {
			return moved, err
		}
		moved += n
		if n > 0 {
			dst.notify()
		}
		if n < chunk {
			break
		}
	}
	return moved, nil
}

// Stats counts a queue's messages: SQS's ApproximateNumberOfMessages (visible, including
// delayed ones that are due) and ApproximateNumberOfMessagesNotVisible (in flight or delayed).
type Stats struct {
	Visible    int
	NotVisible int
}

// Stats reads the queue's counts.
func (q *Queue) Stats() (Stats, error) {
	var s Stats
	err := q.b.db.View(func(tx *bolt.Tx) error {
		qb := tx.Bucket(bucketName(q.name))
		if qb == nil {
			return nil
		}
		now := uint64(max(q.b.clock.Now().UnixNano(), 0))
		return qb.Bucket(visBucket).ForEach(func(k, _ []byte) error {
			if binary.BigEndian.Uint64(k[:8]) <= now {
				s.Visible++
			} else {
				s.NotVisible++
			}
			return nil
		})
	})
	return s, err
}

func (q *Queue) parseReceipt(s string) (receipt, error) {
	r, err := parseReceipt(s)
	if err != nil {
		return receipt{}, err
	}
	if r.tag != q.tag {
		return receipt{}, fmt.Errorf("%w: receipt of another queue", queue.ErrReceiptInvalid)
	}
	return r, nil
}

func (b *Broker) submit(ctx context.Context, apply boltgroup.Apply) error {
	b.mu.Lock()
	select {
	case <-b.closed:
		b.mu.Unlock()
		return queue.ErrClosed
	default:
	}
	b.mu.Unlock()
	err := b.commits.Submit(ctx, apply)
	if errors.Is(err, boltgroup.ErrClosed) {
		return queue.ErrClosed
	}
	return err
}

var errCorrupt = errors.New("localqueue: corrupt record")
