// Package idempotency makes an operation safe to run twice: the first request under a key runs
// it and stores its response together with its effect; every repeat gets that response back.
//
// It follows the IETF Idempotency-Key draft and Stripe's behaviour:
//
//   - A key is 1-255 visible ASCII characters, scoped by caller (Scoped), so two callers never
//     collide.
//   - A request is identified by a fingerprint of its canonical JSON (FingerprintJSON): key
//     order and white space do not matter, values do. The same key with a different request is a
//     Mismatch that names the top-level fields that differ.
//   - Acquire is one conditional write. When the key exists, the stored record comes back with
//     the failed condition, so a duplicate costs that one call and no read.
//   - Complete writes the response and the effect's own items in one transaction: a crash never
//     leaves an effect without its key, or a key without its effect.
//   - Release gives the key back after a retryable failure, committing any effect with the
//     release: the next request runs afresh.
//   - Pend keeps the key pending after an unknown outcome (a provider timeout): the caller's
//     fingerprint and original request bytes stay, with an interim response (a 202), and any effect
//     (the pending payment, the outbox message that queues its resolution) commits with it. A
//     repeat with a different request is a Mismatch; the same request gets Kind Pending and Do
//     resumes it (Resume: one conditional write, one resumer at a time), running the operation
//     again from the stored bytes under a lease that says when the first try was (FirstTried), so
//     time rules about it (a provider's key horizon) can be applied. An unknown outcome is never
//     stored as final and never run afresh. Keeper.Resolve does the same for a background
//     resolver that holds no request of its own (Lookup: one read).
//   - An in-progress lock expires at the context deadline plus a margin and may then be taken
//     over. Each lease carries a fencing token, so a holder that lost its lock cannot commit.
//   - Completed keys are kept for Retention (default 7 days), which must be longer than the
//     callers' RetryWindow (default 3 days); the record's expires_at is the DynamoDB TTL.
//
// # Uses
//
//   - Any function, typed: Do[T] runs op once per key and stores its result with a Codec (JSON
//     by default); a repeat decodes it. A held key is an *InProgressError, another request
//     under the key a *MismatchError.
//   - HTTP: KeyOf reads the Idempotency-Key header (HeaderKey) and says why one is unusable;
//     the service's own handler runs the request under the key (Keeper.Run) and maps the
//     outcome to its answer, a stored one marked HeaderReplayed (shared/payments does).
//   - Any Lambda handler and SQS batches: package idemlambda (a JSONPath key over the event,
//     validation path, raise or pass through, key prefix, response hook; SQS records each
//     under their own key with partial batch failures).
//   - The lifecycle itself: Keeper.Do and Keeper.Run (the operation returns a Result: its
//     Effects and IfNewer writes commit with the response, Final says it may be replayed,
//     Pending keeps an unknown outcome pending), Acquire/Complete/Release/Pend/Resume, and
//     Keeper.Resolve for a background resolver.
//
// # Completion modes
//
// A result with effects completes in one transaction with them (TransactWriteItems in
// DynamoDB). A result with none (the stored result is the record itself: a typed result that is
// the business record, an SQS record done) completes in one conditional write (PutItem), which
// is atomic on its own and costs half the write units; a release with no effect is one
// conditional delete.
//
// # Cache
//
// Keeper.CacheSize keeps completed records in process, bounded, off by default: a replay of
// one costs no store call. A completed record never changes until it expires, and the entry
// expires with it; the price is memory, a cache per process, and that a record removed out of band
// replays from the cache until it expires or is evicted.
//
// # Stores
//
// The records live in any store.Store (package store documents the contract: conditional
// puts that return the old item with a failed condition, all-or-nothing transactions, expiry
// as data): DynamoDB in AWS (package dynamo, whose Attributes also lay records into an
// existing Powertools idempotency table), the embedded bbolt store locally (shared/boltstore).
// The author of another store proves it with the contract suite in package idempotencytest.
package idempotency
