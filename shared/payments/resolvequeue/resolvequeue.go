package resolvequeue

import (
	"context"
	"errors"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/idempotency/idemlambda"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// Consumer runs resolve jobs. Service (with its Keeper) is required.
type Consumer struct {
	Service *payments.Service
}

// Handle runs one message of the resolve queue, once per message id. A job whose key (or whose
// own message key) another caller holds fails with sqsbatch.RetryAfter, so it comes back when
// the key can next be taken rather than after the queue's whole visibility timeout: see
// ComeBack.
func (c Consumer) Handle(ctx context.Context, m queue.Message) error {
	h, err := idemlambda.Message(idemlambda.Config[struct{}]{Keeper: c.Service.Keeper, KeyPrefix: payments.ResolveScope,
		Log: c.Service.Log}, c.Service.ResolveMessage)
	if err != nil {
		return err
	}
	err = h(ctx, m)
	if d, ok := ComeBack(err, m.ReceiveCount, c.now()); ok {
		return sqsbatch.RetryAfter(err, d)
	}
	return err
}

func (c Consumer) now() time.Time {
	if c.Service.Now != nil {
		return c.Service.Now()
	}
	return time.Now()
}

// ComeBack says when a job that failed with err on its receives-th delivery should be tried
// again, for a key another caller holds (a *payments.BusyError, or an
// *idempotency.InProgressError for the message's own key): on a first delivery after the
// keeper's suggested wait, since a live holder (a client's retry, a duplicate delivery) is
// usually done by then; on a later one not before the holder's lock lapses, so a holder that
// died costs the job one more receive and never walks it to the dead-letter queue. ok is false
// for any other error: the job comes back after the queue's visibility timeout, a backoff.
func ComeBack(err error, receives int, now time.Time) (d time.Duration, ok bool) {
	var suggested time.Duration
	var lapses time.Time
	var be *payments.BusyError
	var ip *idempotency.InProgressError
	switch {
	case errors.As(err, &be):
		suggested, lapses = be.RetryAfter, be.LockExpiresAt
	case errors.As(err, &ip):
		suggested, lapses = ip.RetryAfter, ip.LockExpiresAt
	default:
		return 0, false
	}
	if receives > 1 && !lapses.IsZero() {
		return max(suggested, lapses.Sub(now)), true
	}
	return suggested, true
}
