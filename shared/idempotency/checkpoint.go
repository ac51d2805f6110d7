package idempotency

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Checkpoint commits effects in one transaction with the key while the operation is still
// running: the key's record is written again as it stands (in progress, or pending with its
// resolver's lock for a resumed key), under the lease's fencing token, and the lease moves to
// the new version. Use it for a step that must hold before an outside call is made, such as a
// reservation against a shared limit: the step commits only while the lease holds the key, so
// a holder whose lock expired and was taken over cannot reserve, and a crash after the
// checkpoint leaves the step recorded beside a key that a retry takes over (Lease.FirstTried
// says a run went before).
//
// The lock is renewed from ctx's deadline as Acquire sets it. If the lease was lost, nothing
// commits and the error is ErrLeaseLost; if an effect's own condition fails, its
// *store.ConditionError comes back with Index counting from the first effect, and the lease
// still holds the key.
func (k *Keeper) Checkpoint(ctx context.Context, l *Lease, effects ...store.Write) error {
	now := k.now()
	lockUntil := now.Add(k.defaultLock())
	if dl, ok := ctx.Deadline(); ok {
		lockUntil = now.Add(time.Until(dl) + k.lockMargin())
	}
	rec := record{Status: StatusInProgress, Fingerprint: l.Fingerprint, CreatedAt: l.firstTried().UTC(), LockExpiresAt: ptr(lockUntil.UTC())}
	it := store.Item{PK: l.Key, Version: l.Version + 1, LockExpiresAt: ceilUnix(lockUntil), ExpiresAt: now.Add(k.retention()).Unix()}
	if l.prior != nil {
		// A resumed pending key stays pending: its request bytes are what a later resumption
		// runs from, and the resolver's lock lives in the document (see record).
		rec = *l.prior
		rec.ResolveUntil = ptr(lockUntil.UTC())
		it.LockExpiresAt = 0
	}
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	it.Doc = doc
	err = k.Store.Transact(ctx, append([]store.Write{{Table: Table, Put: &it, Cond: store.Cond{Kind: store.VersionIs, Version: l.Version}}}, effects...)...)
	if err != nil {
		return k.commitErr(ctx, l, err)
	}
	l.Version++
	k.event(ctx, "checkpointed", l.Key, "effects", len(effects))
	return nil
}
