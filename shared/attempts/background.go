package attempts

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/redact"
)

// DefaultBackgroundQueue is how many attempts a Background holds before Record waits.
const DefaultBackgroundQueue = 4096

// backgroundRound is the most attempts a Background records in one round (Log.RecordAll
// splits a round into store calls of at most maxItems items), so a backlog never queues
// ahead of the store's other writers by more than a few commits.
const backgroundRound = 96

// backgroundLinger is the longest a round that is not full waits for more attempts.
const backgroundLinger = 20 * time.Millisecond

// Background records attempts behind their caller's answer: Record queues the attempt and
// returns, and one writer stores what is queued in rounds (Log.RecordAll: a few transactions
// for them all) instead of each caller waiting for a commit of its own. A full queue makes
// Record wait: nothing is dropped. An attempt that cannot be stored is logged, as BestEffort
// does.
//
// What it is for: the API exchanges of a process that keeps running (API.Record in the local
// stack). An exchange is what the caller asked and what it was told. The provider calls it
// made are stored before its answer leaves (API), and the answer itself is the key's
// idempotency record, so a crash in the moment between an answer and its exchange's row
// loses that row and nothing that decides a payment. Provider calls and webhook deliveries
// are recorded in line, never here.
//
// Not for a Lambda function: an invocation's goroutines are frozen once it returns.
//
//	bg := attempts.NewBackground(log, logger, 0)
//	defer bg.Close()
//	api := attempts.API{Record: bg.Record}
type Background struct {
	rec    batchRecorder
	log    *slog.Logger
	queue  chan queued
	done   chan struct{}
	mu     sync.RWMutex // held for reading by senders, for writing by Close
	closed bool
}

// batchRecorder stores many attempts at once: Log.
type batchRecorder interface {
	RecordAll(ctx context.Context, as []Attempt) error
}

var _ batchRecorder = (*Log)(nil)

// queued is an attempt to store, or (flushed set) a marker closed once all before it are.
type queued struct {
	ctx     context.Context
	a       Attempt
	flushed chan struct{}
}

// NewBackground starts a Background that stores in rec (a *Log) and logs what it could not
// store to log (nil: slog.Default()). size is the queue's length (0: DefaultBackgroundQueue).
func NewBackground(rec batchRecorder, log *slog.Logger, size int) *Background {
	if size <= 0 {
		size = DefaultBackgroundQueue
	}
	if log == nil {
		log = slog.Default()
	}
	b := &Background{rec: rec, log: log, queue: make(chan queued, size), done: make(chan struct{})}
	go b.run()
	return b
}

// Record queues a. It is a RecordFunc. The attempt outlives the request it came with, so
// ctx's cancellation is dropped (its values are kept). After Close, a is recorded in line.
func (b *Background) Record(ctx context.Context, a Attempt) {
	ctx = context.WithoutCancel(ctx)
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		b.store(ctx, []Attempt{a})
		return
	}
	b.queue <- queued{ctx: ctx, a: a}
	b.mu.RUnlock()
}

// Flush returns once every attempt queued before it is stored (or ctx ends).
func (b *Background) Flush(ctx context.Context) error {
	f := make(chan struct{})
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return nil
	}
	b.queue <- queued{flushed: f}
	b.mu.RUnlock()
	select {
	case <-f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stores what is queued and stops the writer; call it before the store closes.
func (b *Background) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
	b.mu.Unlock()
	<-b.done
}

// run stores the queue in rounds of up to backgroundRound. A round that is not full waits up
// to backgroundLinger for the rest: nobody waits on these rows, and a full round costs one
// commit where many small ones would each cost theirs. A Flush or Close ends the wait.
func (b *Background) run() {
	defer close(b.done)
	linger := time.NewTimer(0)
	for first := range b.queue {
		round := []queued{first}
		linger.Reset(backgroundLinger)
	more:
		for len(round) < backgroundRound && first.flushed == nil {
			select {
			case q, ok := <-b.queue:
				if !ok {
					break more
				}
				round = append(round, q)
				if q.flushed != nil {
					break more
				}
			case <-linger.C:
				break more
			}
		}
		var as []Attempt
		for _, q := range round {
			if q.flushed == nil {
				as = append(as, q.a)
			}
		}
		if len(as) > 0 {
			b.store(round[0].ctx, as)
		}
		for _, q := range round {
			if q.flushed != nil {
				close(q.flushed)
			}
		}
	}
}

// store records as, logging what could not be stored.
func (b *Background) store(ctx context.Context, as []Attempt) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := b.rec.RecordAll(ctx, as); err != nil {
		b.log.LogAttrs(ctx, slog.LevelError, "attempts not recorded",
			slog.Int("attempts", len(as)), slog.String("error", redact.CapLog(err.Error())))
	}
}
