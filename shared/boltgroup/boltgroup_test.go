package boltgroup_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
)

var (
	bucket    = []byte("kv")
	errExists = errors.New("exists")
	errDisk   = errors.New("disk on fire")
)

func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// putOnce writes key once: a second write of the key is the writer's outcome errExists.
func putOnce(key string) boltgroup.Apply {
	return func(tx *bolt.Tx) (error, error) {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return nil, err
		}
		if b.Get([]byte(key)) != nil {
			return errExists, nil
		}
		return nil, b.Put([]byte(key), []byte("v"))
	}
}

func count(t *testing.T, db *bolt.DB) int {
	t.Helper()
	n := 0
	if err := db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucket); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConcurrentWritersGetTheirOwnOutcomes(t *testing.T) {
	db := openDB(t)
	c := boltgroup.New(db, boltgroup.Options{})
	defer c.Close()
	const writers, keys = 32, 20
	var exists, ok atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for k := range keys {
				// Two writers share each key: one writes it, the other is told it exists.
				err := c.Submit(context.Background(), putOnce(fmt.Sprintf("k%d-%d", w/2, k)))
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, errExists):
					exists.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != writers/2*keys || exists.Load() != writers/2*keys || count(t, db) != writers/2*keys {
		t.Fatalf("written %d, exists %d, keys %d", ok.Load(), exists.Load(), count(t, db))
	}
	// Every change was in exactly one commit, and the commits took time.
	if st := c.Stats(); st.Changes != writers*keys || st.Commits < 1 || st.Commits > st.Changes || st.Committing <= 0 {
		t.Errorf("stats %+v, want %d changes in 1 to %[2]d commits", st, writers*keys)
	}
}

// TestFailingChangeIsRetriedAlone: a change whose transaction fails (a storage error) shares a
// group with others; the group is run again change by change, so the others commit and only
// the failing one reports the error.
func TestFailingChangeIsRetriedAlone(t *testing.T) {
	db := openDB(t)
	c := boltgroup.New(db, boltgroup.Options{})
	defer c.Close()
	// Hold the committer in a first transaction while the group queues up behind it.
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = c.Submit(context.Background(), func(tx *bolt.Tx) (error, error) {
			close(held)
			<-hold
			return nil, nil
		})
	}()
	<-held
	const good = 8
	var runs [good + 1]atomic.Int64
	errs := make([]error, good+1)
	var wg sync.WaitGroup
	// waitQueued waits for n changes in the queue (the holder keeps any from committing).
	waitQueued := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for boltgroup.Queued(c) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d changes queued, want %d", boltgroup.Queued(c), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	submit := func(i int) {
		wg.Go(func() {
			errs[i] = c.Submit(context.Background(), func(tx *bolt.Tx) (error, error) {
				runs[i].Add(1)
				if i == good {
					return nil, errDisk // fails every transaction it is in
				}
				return putOnce(fmt.Sprintf("g%d", i))(tx)
			})
		})
	}
	for i := range good {
		submit(i)
	}
	waitQueued(good)
	submit(good) // last in the group: every good change ran before it failed the group
	waitQueued(good + 1)
	close(hold)
	wg.Wait()
	for i := range good {
		if errs[i] != nil {
			t.Fatalf("change %d failed with its neighbour: %v", i, errs[i])
		}
		if n := runs[i].Load(); n != 2 {
			t.Errorf("change %d ran %d times, want 2 (in the failed group, then alone)", i, n)
		}
	}
	if !errors.Is(errs[good], errDisk) || runs[good].Load() != 2 {
		t.Fatalf("the failing change answered %v", errs[good])
	}
	if n := count(t, db); n != good {
		t.Fatalf("%d keys committed, want %d", n, good)
	}
}

func TestCloseCommitsWhatIsQueuedThenRefuses(t *testing.T) {
	db := openDB(t)
	c := boltgroup.New(db, boltgroup.Options{})
	var wg sync.WaitGroup
	var committed atomic.Int64
	for i := range 50 {
		wg.Go(func() {
			if err := c.Submit(context.Background(), putOnce(fmt.Sprint(i))); err == nil {
				committed.Add(1)
			} else if !errors.Is(err, boltgroup.ErrClosed) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // twice is fine
	if err := c.Submit(context.Background(), putOnce("late")); !errors.Is(err, boltgroup.ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
	if int64(count(t, db)) != committed.Load() {
		t.Fatalf("%d keys, %d answered committed", count(t, db), committed.Load())
	}
}

// TestLingerSmoke measures fsync'd commits per second with 32 writers for a few lingers; it
// is how DefaultLinger was picked. It runs only with TWICE_LINGER_SMOKE=1 (it measures, so it
// needs a quiet machine): go test -run TestLingerSmoke -v ./shared/boltgroup/
func TestLingerSmoke(t *testing.T) {
	if os.Getenv("TWICE_LINGER_SMOKE") == "" {
		t.Skip("set TWICE_LINGER_SMOKE=1 to measure")
	}
	for _, linger := range []time.Duration{20 * time.Microsecond, 100 * time.Microsecond, 300 * time.Microsecond, 500 * time.Microsecond, time.Millisecond} {
		db := openDB(t)
		c := boltgroup.New(db, boltgroup.Options{Linger: linger})
		var n atomic.Int64
		var lat []time.Duration
		var mu sync.Mutex
		stop := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				var k [8]byte
				for i := 0; time.Now().Before(stop); i++ {
					binary.BigEndian.PutUint64(k[:], uint64(w)<<32|uint64(i))
					t0 := time.Now()
					if err := c.Submit(context.Background(), putOnce(string(k[:]))); err != nil {
						t.Error(err)
						return
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					n.Add(1)
				}
			})
		}
		wg.Wait()
		c.Close()
		slices.Sort(lat)
		t.Logf("linger %v: %d commits/s, p50 %v, p99 %v", linger, n.Load(), lat[len(lat)/2].Round(time.Microsecond),
			lat[len(lat)*99/100].Round(time.Microsecond))
	}
}

// BenchmarkSubmit32 is 32 writers each submitting one put at a time.
func BenchmarkSubmit32(b *testing.B) {
	db := openDB(b)
	c := boltgroup.New(db, boltgroup.Options{})
	defer c.Close()
	var seq atomic.Uint64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		var k [8]byte
		for pb.Next() {
			binary.BigEndian.PutUint64(k[:], seq.Add(1))
			if err := c.Submit(context.Background(), putOnce(string(k[:]))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
