package asl

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/runtwice/twice/shared/clock"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
)

// Record is what the runner persists for one execution: its public view and the cursor
// that says where to resume.
type Record struct {
	Execution
	// Clock is the execution's own clock under WithTimeFactor; nil: the runner's.
	Clock          *clock.Accelerated `json:"clock,omitempty"`
	DefinitionHash string             `json:"definition_hash"`
	Cursor         Cursor             `json:"cursor"`
	NextEventID    int64              `json:"next_event_id"`
}

// Cursor is the resume point: the current state, the raw input it was entered with, and
// what it was waiting for.
type Cursor struct {
	State       string          `json:"state"`
	Input       json.RawMessage `json:"input"`
	EnteredTime time.Time       `json:"entered_time"`
	// RetryCounts holds attempts used per Retrier (by index); RetryCount is their sum,
	// $$.State.RetryCount.
	RetryCounts []int `json:"retry_counts,omitempty"`
	RetryCount  int   `json:"retry_count"`
	// DueTime is when a Wait ends or a Task retry is due; zero when nothing waits.
	DueTime time.Time `json:"due_time,omitzero"`
}

// Store persists executions. Every method commits durably before it returns: the runner
// calls Save before the next side effect, which is what makes resume exact.
type Store interface {
	// Create stores rec, its first events and its definition, unless an execution with
	// rec.ExecutionArn exists: then it stores nothing and returns the existing record.
	Create(ctx context.Context, rec *Record, events []HistoryEvent, definition []byte) (existing *Record, err error)
	// Save replaces the record and appends events in one commit.
	Save(ctx context.Context, rec *Record, events []HistoryEvent) error
	// Load returns ErrExecutionDoesNotExist for an unknown ARN.
	Load(ctx context.Context, arn string) (*Record, error)
	Definition(ctx context.Context, hash string) ([]byte, error)
	History(ctx context.Context, arn string) ([]HistoryEvent, error)
	// List returns the executions of one state machine, or all with "".
	List(ctx context.Context, stateMachine string) ([]*Record, error)
	// Running returns every execution whose status is RUNNING.
	Running(ctx context.Context) ([]*Record, error)
}

var _ Store = (*BoltStore)(nil)

var (
	bucketExecutions  = []byte("asl.executions")
	bucketHistory     = []byte("asl.history")
	bucketDefinitions = []byte("asl.definitions")
	bucketRunning     = []byte("asl.running")
)

// BoltStore keeps executions in its own buckets of a shared bbolt file, so the local stack
// can keep everything in one data file. Commits are fsync'd (bbolt's default).
type BoltStore struct {
	db      *bolt.DB
	batch   bool
	commits *boltgroup.Committer
}

// BoltOption configures a BoltStore.
type BoltOption func(*BoltStore)

// WithBatch makes Save use db.Batch, which groups concurrent executions' commits into one
// fsync. Set db.MaxBatchSize near the runner's concurrency and db.MaxBatchDelay small
// (a few ms): a batch that never fills waits the full delay.
func WithBatch() BoltOption { return func(s *BoltStore) { s.batch = true } }

// WithCommitter makes Create and Save commit through c, the file's group committer
// (shared/boltgroup), which the local stack shares with its store and queue: checkpoints of
// concurrent executions, store writes and queue sends share one fsync. It takes precedence
// over WithBatch.
func WithCommitter(c *boltgroup.Committer) BoltOption { return func(s *BoltStore) { s.commits = c } }

// update runs fn in a write transaction: through the committer when there is one.
func (s *BoltStore) update(fn func(tx *bolt.Tx) error) error {
	if s.commits != nil {
		return s.commits.Submit(context.Background(), func(tx *bolt.Tx) (error, error) { return nil, fn(tx) })
	}
	if s.batch {
		return s.db.Batch(fn)
	}
	return s.db.Update(fn)
}

// NewBoltStore creates the store's buckets in db if missing.
func NewBoltStore(db *bolt.DB, opts ...BoltOption) (*BoltStore, error) {
	s := &BoltStore{db: db}
	for _, o := range opts {
		o(s)
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketExecutions, bucketHistory, bucketDefinitions, bucketRunning} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("asl: create buckets: %w", err)
	}
	return s, nil
}

func historyKey(arn string, id int64) []byte {
	k := make([]byte, 0, len(arn)+9)
	k = append(k, arn...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

func putRecord(tx *bolt.Tx, rec []byte, arn string, running bool, events [][]byte, ids []int64) error {
	if err := tx.Bucket(bucketExecutions).Put([]byte(arn), rec); err != nil {
		return err
	}
	run := tx.Bucket(bucketRunning)
	if running {
		if err := run.Put([]byte(arn), nil); err != nil {
			return err
		}
	} else if err := run.Delete([]byte(arn)); err != nil {
		return err
	}
	h := tx.Bucket(bucketHistory)
	for i, e := range events {
		if err := h.Put(historyKey(arn, ids[i]), e); err != nil {
			return err
		}
	}
	return nil
}

func encodeEvents(events []HistoryEvent) ([][]byte, []int64, error) {
	enc := make([][]byte, len(events))
	ids := make([]int64, len(events))
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, nil, err
		}
		enc[i], ids[i] = b, e.ID
	}
	return enc, ids, nil
}

// Create implements Store.
func (s *BoltStore) Create(_ context.Context, rec *Record, events []HistoryEvent, definition []byte) (*Record, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	enc, ids, err := encodeEvents(events)
	if err != nil {
		return nil, err
	}
	var existing *Record
	create := func(tx *bolt.Tx) error {
		existing = nil
		if old := tx.Bucket(bucketExecutions).Get([]byte(rec.ExecutionArn)); old != nil {
			existing = &Record{}
			return json.Unmarshal(old, existing)
		}
		defs := tx.Bucket(bucketDefinitions)
		if defs.Get([]byte(rec.DefinitionHash)) == nil {
			if err := defs.Put([]byte(rec.DefinitionHash), definition); err != nil {
				return err
			}
		}
		return putRecord(tx, b, rec.ExecutionArn, rec.Status == StatusRunning, enc, ids)
	}
	if s.commits != nil {
		err = s.commits.Submit(context.Background(), func(tx *bolt.Tx) (error, error) { return nil, create(tx) })
	} else {
		err = s.db.Update(create)
	}
	return existing, err
}

// Save implements Store.
func (s *BoltStore) Save(_ context.Context, rec *Record, events []HistoryEvent) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	enc, ids, err := encodeEvents(events)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		return putRecord(tx, b, rec.ExecutionArn, rec.Status == StatusRunning, enc, ids)
	})
}

// Load implements Store.
func (s *BoltStore) Load(_ context.Context, arn string) (*Record, error) {
	rec := &Record{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExecutions).Get([]byte(arn))
		if b == nil {
			return ErrExecutionDoesNotExist
		}
		return json.Unmarshal(b, rec)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Definition implements Store.
func (s *BoltStore) Definition(_ context.Context, hash string) ([]byte, error) {
	var def []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDefinitions).Get([]byte(hash))
		if b == nil {
			return fmt.Errorf("asl: definition %s: %w", hash, ErrStateMachineDoesNotExist)
		}
		def = bytes.Clone(b)
		return nil
	})
	return def, err
}

// History implements Store.
func (s *BoltStore) History(_ context.Context, arn string) ([]HistoryEvent, error) {
	var out []HistoryEvent
	prefix := append([]byte(arn), 0)
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketExecutions).Get([]byte(arn)) == nil {
			return ErrExecutionDoesNotExist
		}
		c := tx.Bucket(bucketHistory).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var e HistoryEvent
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// List implements Store.
func (s *BoltStore) List(_ context.Context, stateMachine string) ([]*Record, error) {
	var out []*Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketExecutions).ForEach(func(_, v []byte) error {
			rec := &Record{}
			if err := json.Unmarshal(v, rec); err != nil {
				return err
			}
			if stateMachine == "" || rec.StateMachine == stateMachine {
				out = append(out, rec)
			}
			return nil
		})
	})
	return out, err
}

// Running implements Store.
func (s *BoltStore) Running(_ context.Context) ([]*Record, error) {
	var out []*Record
	err := s.db.View(func(tx *bolt.Tx) error {
		execs := tx.Bucket(bucketExecutions)
		return tx.Bucket(bucketRunning).ForEach(func(k, _ []byte) error {
			rec := &Record{}
			if err := json.Unmarshal(execs.Get(k), rec); err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}
