package attempts

import (
	"context"
	"sync"
)

// DefaultBackgroundQueue is how many attempts a Background holds before Record waits.
const DefaultBackgroundQueue = 4096

// Background records attempts behind their caller's answer: Record queues the attempt and
// returns, and one writer stores what is queued, every queued attempt at once, so their
// commits share a group (one fsync on the embedded store) instead of each caller waiting for
// its own. A full queue makes Record wait: nothing is dropped.
//
// What it is for: an API exchange answered from an idempotency record (a replay). Its answer
// changes nothing and sends nothing, and the first exchange under the key, the provider calls
// and the key's record were durable before the first answer, so "was this delivered?" reads
// the same whether the replay's own row is stored a moment later or, after a crash, not at
// all. Provider calls and webhook deliveries are recorded in line.
//
// Not for a Lambda function: an invocation's goroutines are frozen once it returns.
//
//	bg := attempts.NewBackground(attempts.BestEffort(log, logger), 0)
//	defer bg.Close()
//	api := attempts.API{Record: attempts.BestEffort(log, logger), Replays: bg.Record}
type Background struct {
	record RecordFunc
	queue  chan queued
	done   chan struct{}
	mu     sync.RWMutex // held for reading by senders, for writing by Close
	closed bool
}

// queued is an attempt to store, or (flushed set) a marker closed once all before it are.
type queued struct {
	ctx     context.Context
	a       Attempt
	flushed chan struct{}
}

// NewBackground starts a Background that stores through record (build it with BestEffort).
// size is the queue's length (0: DefaultBackgroundQueue).
func NewBackground(record RecordFunc, size int) *Background {
	if size <= 0 {
		size = DefaultBackgroundQueue
	}
	b := &Background{record: record, queue: make(chan queued, size), done: make(chan struct{})}
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
		b.record(ctx, a)
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

// run stores the queue in rounds: everything queued when a round starts, recorded at once.
func (b *Background) run() {
	defer close(b.done)
	for first := range b.queue {
		round := []queued{first}
	more:
		for len(round) < cap(b.queue) {
			select {
			case q, ok := <-b.queue:
				if !ok {
					break more
				}
				round = append(round, q)
			default:
				break more
			}
		}
		var wg sync.WaitGroup
		for _, q := range round {
			if q.flushed == nil {
				wg.Go(func() { b.record(q.ctx, q.a) })
			}
		}
		wg.Wait()
		for _, q := range round {
			if q.flushed != nil {
				close(q.flushed)
			}
		}
	}
}
