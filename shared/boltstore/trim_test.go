//go:build linux

package boltstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/store"
)

func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Skip("no RssFile line")
	return 0
}

// TestTrimReleasesMappedPages fills a store, reads every item (touching every page of the
// mapping), trims, and checks the process's file-backed resident set fell and the data is intact.
func TestTrimReleasesMappedPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Trim releases pages on Linux only")
	}
	// New, not Open: no background trimming, so the test sees the pages its reads touched.
	db, err := bolt.Open(filepath.Join(t.TempDir(), "trim.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(db)
	defer s.Close()
	if _, _, err := mapping(s.db); err != nil {
		t.Fatalf("bbolt's mapping: %v", err)
	}
	ctx := context.Background()
	doc := []byte(strings.Repeat("x", 2000))
	const n = 20_000 // about 40 MB
	for i := 0; i < n; i += 100 {
		ws := make([]store.Write, 100)
		for j := range ws {
			ws[j] = store.Write{Table: "t", Put: &store.Item{PK: fmt.Sprint("k", i+j), Doc: doc}}
		}
		if err := s.Transact(ctx, ws...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := s.Get(ctx, "t", fmt.Sprint("k", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	before := rssFileKB(t)
	if err := s.Trim(); err != nil {
		t.Fatal(err)
	}
	after := rssFileKB(t)
	if after > before-20_000 {
		t.Fatalf("file-backed RSS %d kB before Trim, %d kB after: expected at least 20 MB less", before, after)
	}
	for i := range n {
		it, err := s.Get(ctx, "t", fmt.Sprint("k", i), "")
		if err != nil || len(it.Doc) != len(doc) {
			t.Fatalf("item %d after Trim: %v", i, err)
		}
	}
}

// TestOneTrimmerForEveryStore: stores kept trimmed in one process share one loop, which stops
// when the last of them stops.
func TestOneTrimmerForEveryStore(t *testing.T) {
	open := func(name string) *bolt.DB {
		db, err := bolt.Open(filepath.Join(t.TempDir(), name), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open("a.db"), open("b.db")
	stopA := KeepTrimmed(a)
	trimmer.mu.Lock()
	done := trimmer.done
	trimmer.mu.Unlock()
	stopB := KeepTrimmed(b)
	trimmer.mu.Lock()
	if len(trimmer.dbs) != 2 || trimmer.done != done {
		t.Fatalf("%d stores, same loop %v", len(trimmer.dbs), trimmer.done == done)
	}
	trimmer.mu.Unlock()
	stopA()
	stopA() // a second stop is harmless
	select {
	case <-done:
		t.Fatal("the loop stopped while a store still needs it")
	default:
	}
	stopB()
	<-done // returns only once the loop has ended
	trimmer.mu.Lock()
	defer trimmer.mu.Unlock()
	if len(trimmer.dbs) != 0 {
		t.Fatalf("%d stores left", len(trimmer.dbs))
	}
}
