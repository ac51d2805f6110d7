// Package storetest is the one contract suite every store.Store implementation must pass,
// the way watermill's pubsub/tests is run by each of its Pub/Subs.
//
// An implementation's test calls Run with a constructor that returns an empty store holding two
// tables: Simple (keyed by PK alone) and Sorted (PK and SK, with the secondary index).
package storetest
