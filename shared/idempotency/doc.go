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
// Keeper.Do wraps any operation; Keeper.Middleware wraps any http.Handler, with Stage to commit
// a handler's writes with its response, NotFinal for a retryable failure, MarkPending for an
// unknown outcome, and LeaseOf for the lease a request runs under. The records live in
// any store.Store: DynamoDB in AWS, the embedded bbolt store locally.
package idempotency
