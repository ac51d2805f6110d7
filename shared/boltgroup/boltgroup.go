// Package boltgroup is the group committer over one bbolt file: concurrent writers hand it
// their changes, and it runs many of them in one transaction, with one fsync, answering each
// with its own outcome. An fsync costs milliseconds and bbolt allows one writer at a time, so
// committing each change alone caps a file at a few hundred to a few thousand commits a
// second; sharing the fsync lifts that roughly by the number of writers.
//
// shared/boltstore (the embedded store), infra/localqueue (the durable queue) and the local
// ASL runner's checkpoints (infra/asl with WithCommitter) all commit through it; the local
// stack gives them one Committer for its one file, so a store write, a queue send and a
// checkpoint that arrive together share a single fsync.
//
// The policy: take the first waiting change, then every change already queued, without
// waiting. If the group is still smaller than the largest of the recent groups (about how
// many writers are active), wait up to Linger once for the writers released by the last
// fsync to come back; a lone writer never waits. A group holds at most MaxGroup changes.
// When a group's transaction fails (a bbolt error, not a change's own outcome), each change
// is run again alone, so one change's storage error never fails its neighbours: an Apply may
// therefore run more than once and must compute everything it reports from the transaction
// it is given.
//
//	c := boltgroup.New(db, boltgroup.Options{})
//	defer c.Close()
//	err := c.Submit(ctx, func(tx *bolt.Tx) (outcome, err error) {
//		b, err := tx.CreateBucketIfNotExists([]byte("kv"))
//		if err != nil {
//			return nil, err // fails the transaction: retried alone
//		}
//		if b.Get(key) != nil {
//			return ErrExists, nil // this change's outcome; the others still commit
//		}
//		return nil, b.Put(key, value)
//	})
package boltgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Defaults of Options.
const (
	// DefaultLinger is the longest a group waits for the rest of its writers. Measured with
	// TestLingerSmoke (32 writers, fsync'd file, 2 cores): see docs/performance.md, "Group commit".
	DefaultLinger = 300 * time.Microsecond
	// DefaultMaxGroup caps the changes of one transaction.
	DefaultMaxGroup = 256
)

// ErrClosed is Submit's answer after Close.
var ErrClosed = errors.New("boltgroup: committer closed")

// Apply is one writer's change, run inside the group's transaction. outcome is the writer's
// own answer (nil, or an error such as a failed condition) and never fails the group; err is
// a storage error and fails the transaction, after which the change runs again alone.
type Apply func(tx *bolt.Tx) (outcome error, err error)

// Options configure a Committer; zero values take the defaults.
type Options struct {
	Linger   time.Duration
	MaxGroup int
}

// Committer groups the commits of one bbolt file. It never closes the file.
type Committer struct {
	db       *bolt.DB
	linger   time.Duration
	maxGroup int

	writes chan *request
	done   chan struct{}
	closed chan struct{}
	mu     sync.Mutex
	stop   sync.Once

	commits, changes, committing atomic.Int64 // Stats
}

// Stats is what a committer has done since it started.
type Stats struct {
	Commits int64 // transactions committed (or failed), each one group
	Changes int64 // changes they carried
	// Committing is the time spent in those transactions, their fsyncs included: against the
	// time elapsed, how busy the committer is (near 100%, the file's commits are the limit).
	Committing time.Duration
}

// Stats reports the committer's counts so far.
func (c *Committer) Stats() Stats {
	return Stats{Commits: c.commits.Load(), Changes: c.changes.Load(), Committing: time.Duration(c.committing.Load())}
}

type request struct {
	apply  Apply
	result chan error
}

// New starts a Committer on db.
func New(db *bolt.DB, opts Options) *Committer {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = DefaultMaxGroup
	}
	c := &Committer{db: db, linger: opts.Linger, maxGroup: opts.MaxGroup,
		writes: make(chan *request, 1024), done: make(chan struct{}), closed: make(chan struct{})}
	go c.loop()
	return c
}

// DB is the file the committer writes.
func (c *Committer) DB() *bolt.DB { return c.db }

// Close commits what is queued, then stops; later Submits answer ErrClosed. It leaves the
// file open and is safe to call more than once.
func (c *Committer) Close() error {
	c.stop.Do(func() {
		c.mu.Lock()
		close(c.closed)
		close(c.writes)
		c.mu.Unlock()
		<-c.done
	})
	return nil
}

// Submit runs apply in a shared transaction and returns its outcome, or the storage error
// (wrapped) when the change could not commit even alone. Once queued, the change commits or
// fails whatever ctx does, and Submit waits for the answer, so a caller never takes a
// committed change for a failed one; ctx bounds only the wait for a place in the queue.
func (c *Committer) Submit(ctx context.Context, apply Apply) error {
	req := &request{apply: apply, result: make(chan error, 1)}
	c.mu.Lock()
	select {
	case <-c.closed:
		c.mu.Unlock()
		return ErrClosed
	default:
	}
	// Holding mu keeps Close from closing writes under a send; the buffer keeps it short.
	select {
	case c.writes <- req:
		c.mu.Unlock()
	case <-ctx.Done():
		c.mu.Unlock()
		return ctx.Err()
	}
	return <-req.result
}

func (c *Committer) loop() {
	defer close(c.done)
	var group []*request
	var recent [8]int // sizes of the last groups: about how many writers are active
	n := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for req := range c.writes {
		group = append(group[:0], req)
		group, _ = c.gather(group, slices.Max(recent[:]), timer)
		recent[n%len(recent)] = len(group)
		n++
		c.commit(group)
	}
}

// gather adds what is queued to group, and waits up to the linger once while the group is
// smaller than target. open is false when the queue closed meanwhile.
func (c *Committer) gather(group []*request, target int, timer *time.Timer) (_ []*request, open bool) {
	started := false
	defer func() {
		if started {
			timer.Stop()
		}
	}()
	for len(group) < c.maxGroup {
		select {
		case r, ok := <-c.writes:
			if !ok {
				return group, false
			}
			group = append(group, r)
			continue
		default:
		}
		if len(group) >= target {
			return group, true
		}
		if !started {
			timer.Reset(c.linger)
			started = true
		}
		select {
		case r, ok := <-c.writes:
			if !ok {
				return group, false
			}
			group = append(group, r)
		case <-timer.C:
			started = false // fired: nothing to stop
			return group, true
		}
	}
	return group, true
}

func (c *Committer) commit(group []*request) {
	start := time.Now()
	outcomes := make([]error, len(group))
	err := c.db.Update(func(tx *bolt.Tx) error {
		for i, r := range group {
			o, err := r.apply(tx)
			if err != nil {
				return err
			}
			outcomes[i] = o
		}
		return nil
	})
	if err != nil && len(group) > 1 {
		// One change's storage error must not fail its neighbours: each runs again alone.
		for i, r := range group {
			outcomes[i] = nil
			err := c.db.Update(func(tx *bolt.Tx) error {
				o, err := r.apply(tx)
				outcomes[i] = o
				return err
			})
			if err != nil {
				outcomes[i] = fmt.Errorf("boltgroup: commit: %w", err)
			}
		}
	} else if err != nil {
		outcomes[0] = fmt.Errorf("boltgroup: commit: %w", err)
	}
	// Counted before the answers, so a writer that was answered finds its change in Stats.
	c.committing.Add(int64(time.Since(start)))
	c.commits.Add(1)
	c.changes.Add(int64(len(group)))
	for i, r := range group {
		r.result <- outcomes[i]
	}
}
