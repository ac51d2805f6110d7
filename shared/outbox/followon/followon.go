package followon

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// Targets are what the follow-on work is delivered to. Every field is required.
type Targets struct {
	// Payments queues resolve jobs and auto-cancels (its Resolver) and starts recoveries (its
	// OnDecline).
	Payments *payments.Service
	// Steerer, with its Starter, resumes a parked recovery when its timer fires, and brings
	// the timer forward for a committed signal.
	Steerer *recovery.Steerer
	// DeadLetters, with its Requeuer, sends operators' retries; it also opens the records of
	// disputes that need evidence and of refunds that failed.
	DeadLetters *deadletter.Records
	// WebhookQueue takes the events a backfill pass could not apply.
	WebhookQueue ingest.Sender
	// Publisher publishes every applied payment change.
	Publisher *feed.Publisher
}

// Errors of Handlers.
var (
	// ErrMissingTarget means a Targets field that a kind is delivered to is not set.
	ErrMissingTarget = errors.New("followon: a follow-on target is missing")
	// ErrDuplicateKind means two packages registered a handler for the same kind: one of them
	// would never run.
	ErrDuplicateKind = errors.New("followon: a kind has two handlers")
)

func (t Targets) check() error {
	var missing []string
	add := func(ok bool, name string) {
		if !ok {
			missing = append(missing, name)
		}
	}
	add(t.Payments != nil && t.Payments.Store != nil, "Payments (with its Store)")
	add(t.Payments != nil && t.Payments.Resolver != nil, "Payments.Resolver")
	add(t.Payments != nil && t.Payments.OnDecline != nil, "Payments.OnDecline")
	add(t.Steerer != nil && t.Steerer.Store != nil && t.Steerer.Starter != nil, "Steerer (with its Store and Starter)")
	add(t.DeadLetters != nil && t.DeadLetters.Store != nil && t.DeadLetters.Requeuer != nil, "DeadLetters (with its Store and Requeuer)")
	add(t.WebhookQueue != nil, "WebhookQueue")
	add(t.Publisher != nil && t.Publisher.Store != nil && t.Publisher.Sink != nil, "Publisher (with its Store and Sink)")
	if len(missing) > 0 {
		return fmt.Errorf("%w: %v", ErrMissingTarget, missing)
	}
	return nil
}

// Handlers returns the relay's handler of every kind (Kinds) over t; ErrMissingTarget when t
// lacks one.
func Handlers(t Targets) (map[string]outbox.Handler, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return table(t)
}

// Kinds lists, sorted, every kind Handlers registers.
func Kinds() []string {
	h, _ := table(Targets{})
	return slices.Sorted(maps.Keys(h))
}

// table is the registry itself. Building it calls no target (each handler reads its target
// when it runs), so Kinds can list it without one.
func table(t Targets) (map[string]outbox.Handler, error) {
	h := map[string]outbox.Handler{}
	var dups []string
	add := func(m map[string]outbox.Handler) {
		for kind, f := range m {
			if _, dup := h[kind]; dup {
				dups = append(dups, kind)
			}
			h[kind] = f
		}
	}
	// The payment lifecycle: queue a resolve job or an auto-cancel, start a recovery.
	add(t.Payments.FollowOns())
	// A parked recovery's timer, and the wake of a steering signal (an operator's or a
	// provider event's) that brings it forward.
	add(map[string]outbox.Handler{recovery.KindResume: t.Steerer.ResumeFollowOn(), recovery.KindWake: t.Steerer.WakeFollowOn()})
	// An operator's retry of a dead letter: back to the queue the message died on, a new
	// recovery round, or reconciliation again.
	add(map[string]outbox.Handler{deadletter.KindRetry: t.DeadLetters.RetryFollowOn()})
	// Records a person must work: a dispute's evidence, a refund that failed.
	add(payments.DisputeFollowOns(t.DeadLetters))
	add(payments.RefundFollowOns(t.DeadLetters))
	// An event the backfill could not apply goes to the webhook queue.
	add(backfill.FollowOns(t.WebhookQueue))
	// Every applied payment change goes out on the event feed.
	add(t.Publisher.Handlers())
	if len(dups) > 0 {
		return h, fmt.Errorf("%w: %v", ErrDuplicateKind, dups)
	}
	return h, nil
}
