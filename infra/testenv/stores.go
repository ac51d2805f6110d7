package testenv

import (
	"path/filepath"
	"testing"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/store"
)

// Stores opens both forms of the store for a test, by name: "bbolt" (a file in the test's
// temporary directory) and "dynamodb" (DynamoDB Local, with a fresh table with the secondary
// index per logical table; skipped when the test servers are not up, failed when they are
// required). A test ranges over it to run the same case on both.
func Stores(logical ...string) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"bbolt": func(t *testing.T) store.Store {
			s, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"dynamodb": func(t *testing.T) store.Store {
			db := DynamoDB(t)
			tables := make(map[string]string, len(logical))
			for _, l := range logical {
				tables[l] = CreateTable(t, db, Schema{GSI1: true})
			}
			return dynamo.New(db, tables)
		},
	}
}
