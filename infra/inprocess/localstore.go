package inprocess

import (
	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/store"
)

// localStore is the embedded store as the stack uses it: the store contract, and the bbolt
// file it shares with the queue and the runner's checkpoints.
type localStore interface {
	store.Store
	DB() *bolt.DB
	Committer() *boltgroup.Committer
	Writes() map[string]int64
	Close() error
}

var _ localStore = (*boltstore.Store)(nil)
