// Package store is the contract between twice's domain packages and the durable stores they
// run on: DynamoDB in AWS (package dynamo) and an embedded bbolt file locally
// (package shared/boltstore).
//
// The contract is deliberately small. An Item is a partition key, an optional sort key, an
// opaque JSON document and the handful of attributes that conditions, expiry and the one
// secondary index need. Every write is conditional if the caller wants it to be, and a set of
// writes commits atomically or not at all: that is what lets an idempotency key commit together
// with its effect, and a webhook's dedupe record together with the state change it causes.
// Items that stand alone (a log entry and its lookups) are written with PutAll instead: no
// conditions, no atomicity, and half the write units in DynamoDB.
//
// A failed condition is reported as a *ConditionError that carries the item as it was, so a
// caller that loses a race learns what won without a second read (DynamoDB's
// ReturnValuesOnConditionCheckFailure = ALL_OLD).
//
// Every implementation passes the shared suite in package store/storetest.
package store
