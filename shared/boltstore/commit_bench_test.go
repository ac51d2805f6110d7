package boltstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/store"
)

// BenchmarkCommitShape measures one commit of the items a group commit of the local stack
// holds under load (25 items of about 1 KB at random keys, docs/performance.md), two ways on
// the same disk:
//
//   - bbolt: the store's commit into a table that already holds 50,000 items, so each item
//     lands on a leaf of its own, as a payment's keys do: every dirty page written at its
//     place, then two fdatasyncs (the pages, then the meta page);
//   - log: the same items' bytes appended to a preallocated file, then one fsync: what a
//     log-structured store's commit writes.
//
// It is the measurement behind "fewer pages a payment, not a faster disk" and the log-
// structured store it points to: go test -run XXX -bench CommitShape ./shared/boltstore
func BenchmarkCommitShape(b *testing.B) {
	const (
		filled  = 50_000
		perTx   = 25
		docSize = 1000
	)
	doc := []byte(`{"d":"` + strings.Repeat("x", docSize-8) + `"}`)
	key := func(i int) string {
		h := sha256.Sum256([]byte(fmt.Sprint(i)))
		return "pay#" + hex.EncodeToString(h[:])
	}
	items := func(from int) []store.Item {
		its := make([]store.Item, perTx)
		for j := range its {
			its[j] = store.Item{PK: key(from + j), SK: "s", Doc: doc}
		}
		return its
	}

	b.Run("bbolt", func(b *testing.B) {
		s, err := Open(filepath.Join(b.TempDir(), "commit.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		for i := 0; i < filled; i += 100 {
			its := make([]store.Item, 100)
			for j := range its {
				its[j] = store.Item{PK: key(i + j), SK: "s", Doc: doc}
			}
			if err := s.PutAll(ctx, "t", its...); err != nil {
				b.Fatal(err)
			}
		}
		written := func() int64 { st := s.DB().Stats(); return st.TxStats.GetWrite() }
		before := written()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if err := s.PutAll(ctx, "t", items(filled+i*perTx)...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(written()-before)/float64(b.N), "pages/commit")
	})

	b.Run("log", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "commit.log"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(256 << 20); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		var off int64
		var buf []byte
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			buf = buf[:0]
			for _, it := range items(filled + i*perTx) {
				buf = append(buf, it.PK...)
				buf = append(buf, encode(it)...)
			}
			if off+int64(len(buf)) > 256<<20 {
				off = 0
			}
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
			off += int64(len(buf))
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes/commit")
	})
}
