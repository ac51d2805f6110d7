// Package localqueue is the local stack's queue.Queue: SQS standard-queue semantics on a bbolt
// file, so messages survive kill -9.
//
// A Broker owns the queues of one *bbolt.DB (shared with the local store if the stack wants one
// file) and a group committer: the first waiting change starts a transaction at once, every
// change that queued meanwhile joins it, and all share one fsync. When the previous group was
// bigger the committer lingers up to half a millisecond for the rest of it; a lone writer never
// waits. Each queue is a bucket holding its messages by sequence number and an index ordered by
// the time each becomes visible, so a receive reads the index from the front and stops at the
// first message still hidden.
//
// Receive long-polls without a loop: it first looks in a read transaction (empty polls never
// take the writer), then waits for a Send (or ChangeVisibility to zero, or a move) to wake it,
// or for a clock timer set to when the next hidden message becomes visible. Time comes from a
// shared/clock Clock (Options.Clock); tests use a clock.Fake, whose Advance fires the timers and
// so wakes the waiters.
//
// Redrive follows SQS: the receive that would exceed a queue's MaxReceiveCount moves the
// message, id, body, attributes and receive count intact, to its dead-letter queue.
// MoveMessages moves messages back (SQS StartMessageMoveTask) for an operator's retry.
//
// Receipt handles name one receive: a receipt from an earlier receive of a message that has
// since been received again is refused with queue.ErrStaleReceipt, so a slow consumer cannot
// delete a message a newer consumer owns. (SQS accepts it in moto; see queue.Queue.Delete.)
package localqueue
