package idempotency

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Result is what an operation run under a key produced.
type Result struct {
	Response Response
	// Effects commit in the same transaction as the response (or the release); if one's
	// condition fails, nothing commits.
	Effects []store.Write
	// IfNewer is a group of writes guarded by their items' versions (a payment's put and the
	// change message that announces it) that commits with the response whole or not at all:
	// when one of its conditions fails (a webhook stored a newer version first), Refresh, if
	// set, is asked for the group to try instead, read against what is stored now; without
	// it, or when it returns none, or after refreshTries, the group is dropped and the rest
	// commits without it. A message that announces a write never commits without that write.
	IfNewer []store.Write
	Refresh func(ctx context.Context) ([]store.Write, error)
	// Final says the response may be replayed. An operation that failed in a way that may be
	// retried returns Final false (and Pending false): its effects commit, the key is released,
	// and the next request with the key runs the operation again.
	Final bool
	// Pending says the operation's outcome is unknown (a provider timeout after the request
	// was sent): the key keeps Request (the caller's bytes) and Response as the interim answer,
	// and its effects commit with it (Keeper.Pend). A repeat resumes it; nothing runs afresh.
	Pending bool
	Request []byte
}

// Do makes op idempotent under (scope, key): the first request runs it and stores its
// response with its effects; a repeat gets the stored response back (Outcome.Kind Replay) without
// running op; a concurrent repeat gets InProgress, a different request Mismatch. For New, the
// returned Outcome.Response is op's response. If op fails, the key is released and op's error
// returned, so a retry runs op again.
//
// A pending key (an earlier run's outcome is unknown) is resumed: op runs again under a lease
// whose Request and FirstTried say what the first run sent and when (see Run), and the outcome is
// Replay when that resolved it, Pending (the interim answer) when it did not or when another
// caller is resolving it.
func (k *Keeper) Do(ctx context.Context, scope, key string, fp Fingerprint, op func(ctx context.Context) (Result, error)) (Outcome, error) {
	return k.Run(ctx, scope, key, fp, func(ctx context.Context, _ *Lease) (Result, error) { return op(ctx) })
}

// Run is Do for an operation that needs its lease: a resumed pending key's lease carries the
// caller's stored request bytes (run from those, never from a reconstruction) and the time of
// the first try.
func (k *Keeper) Run(ctx context.Context, scope, key string, fp Fingerprint, op func(ctx context.Context, l *Lease) (Result, error)) (Outcome, error) {
	out, err := k.Acquire(ctx, scope, key, fp)
	if err != nil {
		return out, err
	}
	switch out.Kind {
	case New:
	case Pending:
		return k.resume(ctx, out, op)
	default:
		return out, nil
	}
	return k.run(ctx, out, out.Lease, op)
}

// Resolve resumes a pending key found by Lookup, for a background resolver that holds no request
// of its own: op runs from the lease's stored request. A key that completed meanwhile is Replay,
// one held by another caller InProgress (or Pending with Resolving), one that does not exist New
// with no lease (nothing to resolve).
func (k *Keeper) Resolve(ctx context.Context, scope, key string, op func(ctx context.Context, l *Lease) (Result, error)) (Outcome, error) {
	out, err := k.Lookup(ctx, scope, key)
	if err != nil || out.Kind != Pending {
		return out, err
	}
	return k.resume(ctx, out, op)
}

func (k *Keeper) resume(ctx context.Context, out Outcome, op func(ctx context.Context, l *Lease) (Result, error)) (Outcome, error) {
	if out.Resolving {
		return out, nil
	}
	l, err := k.Resume(ctx, out)
	if errors.Is(err, ErrLeaseLost) {
		// Someone else resumed it just now: the interim answer stands. Their lock's expiry is
		// not known without a read; the suggested wait is the longest one.
		out.Resolving, out.RetryAfter = true, k.maxRetryAfter()
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Resumed = true
	return k.run(ctx, out, l, op)
}

func (k *Keeper) run(ctx context.Context, out Outcome, l *Lease, op func(ctx context.Context, l *Lease) (Result, error)) (Outcome, error) {
	res, opErr := op(ctx, l)
	if opErr != nil {
		if err := k.Release(ctx, l); err != nil && !errors.Is(err, ErrLeaseLost) {
			return out, errors.Join(opErr, err)
		}
		return out, opErr
	}
	// The operation has happened: commit its outcome even if the caller's deadline has just
	// passed (a provider that answered late), bounded on its own, so the effect is not left
	// uncommitted behind a lock until it expires.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := k.commit(cctx, l, res); err != nil {
		return out, err
	}
	out.Response = &res.Response
	if out.Resumed {
		switch {
		case res.Final:
			out.Kind = Replay
		case res.Pending || l.prior != nil:
			out.Kind = Pending
		}
	}
	return out, nil
}

// commitTimeout bounds the commit that follows an operation.
const commitTimeout = 10 * time.Second

// refreshTries bounds how often a lost IfNewer group is read again before it is dropped.
const refreshTries = 4

// commit completes, pends or releases the lease with the result's writes. An IfNewer group
// that lost to a newer version is refreshed or dropped; each costs one more transaction, and
// only in that race.
func (k *Keeper) commit(ctx context.Context, l *Lease, res Result) error {
	group := res.IfNewer
	for try := 0; ; try++ {
		ws := append(slices.Clone(res.Effects), group...)
		var err error
		switch {
		case res.Final:
			err = k.Complete(ctx, l, res.Response, ws...)
		case res.Pending:
			err = k.Pend(ctx, l, res.Response, res.Request, ws...)
		default:
			err = k.Release(ctx, l, ws...)
		}
		var ce *store.ConditionError
		if !errors.As(err, &ce) || ce.Index < len(res.Effects) || len(group) == 0 {
			return err
		}
		k.log().InfoContext(ctx, "idempotency effect superseded by a newer version", "key", l.Key)
		group = nil
		if res.Refresh != nil && try+1 < refreshTries {
			if group, err = res.Refresh(ctx); err != nil {
				return err
			}
		}
	}
}
