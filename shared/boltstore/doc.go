// Package boltstore is the embedded store.Store: one bbolt file, fsync'd on every commit, used
// by the local stack and by tests that want real durability without a server.
//
// Each logical table is a bucket; a table's secondary index is a second bucket of index keys.
// Writes go through a group committer: the first waiting write starts a transaction at once and
// every write that queued while the previous fsync ran joins it. A lone writer therefore pays one
// fsync and no timer, and 32 concurrent writers share one fsync between them. bbolt's own Batch
// waits for a timer or a full batch, which costs a lone writer up to MaxBatchDelay per write.
//
// Conditions are evaluated with store.Cond.Holds inside the write transaction, so they mean
// exactly what they mean for DynamoDB.
//
//	db, err := boltstore.Open(filepath.Join(dir, "twice.db"))
//	if err != nil { ... }
//	defer db.Close()
//	err = db.Put(ctx, "payments", store.Item{PK: "pay_1", Doc: doc}, store.Cond{Kind: store.NotExists})
package boltstore
