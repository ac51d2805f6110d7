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
	// Final says the response may be replayed. An operation whose outcome is unknown (a
	// provider timeout) returns Final false: its effects commit, the key is released, and the
	// next request with the key runs the operation again.
	Final bool
}

// Do makes op idempotent under (scope, key): the first request runs it and stores its
// response with its effects; a repeat gets the stored response back (Outcome.Kind Replay) without
// running op; a concurrent repeat gets InProgress, a different request Mismatch. For New, the
// returned Outcome.Response is op's response. If op fails, the key is released and op's error
// returned, so a retry runs op again.
func (k *Keeper) Do(ctx context.Context, scope, key string, fp Fingerprint, op func(ctx context.Context) (Result, error)) (Outcome, error) {
	out, err := k.Acquire(ctx, scope, key, fp)
	if err != nil || out.Kind != New {
		return out, err
	}
	res, opErr := op(ctx)
	if opErr != nil {
		if err := k.Release(ctx, out.Lease); err != nil && !errors.Is(err, ErrLeaseLost) {
			return out, errors.Join(opErr, err)
		}
		return out, opErr
	}
	// The operation has happened: commit its outcome even if the caller's deadline has just
	// passed (a provider that answered late), bounded on its own, so the effect is not left
	// uncommitted behind a lock until it expires.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := k.commit(cctx, out.Lease, res); err != nil {
		return out, err
	}
	out.Response = &res.Response
	return out, nil
}

// commitTimeout bounds the commit that follows an operation.
const commitTimeout = 10 * time.Second

// commit completes or releases the lease with the result's writes, dropping IfNewer writes that
// lost to a newer version. Each drop costs one more transaction, and only in that race.
func (k *Keeper) commit(ctx context.Context, l *Lease, res Result) error {
	ifNewer := slices.Clone(res.IfNewer)
	for {
		ws := append(slices.Clone(res.Effects), ifNewer...)
		var err error
		if res.Final {
			err = k.Complete(ctx, l, res.Response, ws...)
		} else {
			err = k.Release(ctx, l, ws...)
		}
		var ce *store.ConditionError
		if !errors.As(err, &ce) || ce.Index < len(res.Effects) {
			return err
		}
		k.log.InfoContext(ctx, "idempotency effect superseded by a newer version", "key", l.Key)
		ifNewer = slices.Delete(ifNewer, ce.Index-len(res.Effects), ce.Index-len(res.Effects)+1)
	}
}
