package idempotency

import (
	"context"
	"errors"

	"github.com/runtwice/twice/shared/store"
)

// Result is what an operation run under a key produced.
type Result struct {
	Response Response
	// Effects commit in the same transaction as the response (or the release).
	Effects []store.Write
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
	if res.Final {
		err = k.Complete(ctx, out.Lease, res.Response, res.Effects...)
	} else {
		err = k.Release(ctx, out.Lease, res.Effects...)
	}
	if err != nil {
		return out, err
	}
	out.Response = &res.Response
	return out, nil
}
