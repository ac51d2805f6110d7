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
	// IfNewer are writes guarded by store.VersionBelow that commit with the response unless the
	// store already holds a newer version of their item (a webhook got there first); then they
	// are dropped and the rest commits without them.
	IfNewer []store.Write
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
		out.Resolving = true
		return out, nil // someone else resumed it: the interim answer stands
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

// commit completes, pends or releases the lease with the result's writes, dropping IfNewer
// writes that lost to a newer version. Each drop costs one more transaction, and only in that
// race.
func (k *Keeper) commit(ctx context.Context, l *Lease, res Result) error {
	ifNewer := slices.Clone(res.IfNewer)
	for {
		ws := append(slices.Clone(res.Effects), ifNewer...)
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
		if !errors.As(err, &ce) || ce.Index < len(res.Effects) {
			return err
		}
		k.log().InfoContext(ctx, "idempotency effect superseded by a newer version", "key", l.Key)
		ifNewer = slices.Delete(ifNewer, ce.Index-len(res.Effects), ce.Index-len(res.Effects)+1)
	}
}
