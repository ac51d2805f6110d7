package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
)

// armStartFailures makes the stack's next n recovery starts fail (POST /ops/_faults), as a
// throttled StartExecution would: the outbox must deliver them anyway.
func (o opsClient) armStartFailures(ctx context.Context, n int) error {
	return o.do(ctx, http.MethodPost, "/ops/_faults", map[string]any{"target": "start_execution", "count": n}, nil)
}

// drainOutbox disarms the recovery-start faults and waits, within ctx, until the stack's outbox
// and its queues are empty: a message in its backoff when the run ends is late, not lost, and
// a delivery still queued will commit more follow-on work when its consumer takes it.
func (o opsClient) drainOutbox(ctx context.Context) {
	_ = o.armStartFailures(ctx, 0)
	for ctx.Err() == nil {
		var c struct {
			OutboxPending *int `json:"outbox_pending"`
			QueuePending  *int `json:"queue_pending"`
		}
		if err := o.do(ctx, http.MethodGet, "/ops/_faults", nil, &c); err == nil && c.OutboxPending != nil && *c.OutboxPending == 0 &&
			c.QueuePending != nil && *c.QueuePending == 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readFollowOns counts, in a stopped stack's data directory, the follow-on effects that were
// committed but never happened: outbox messages still undelivered, and payments that end
// declined without a recovery execution. Both must be 0 once the stack settled.
func readFollowOns(ctx context.Context, data string, obs []Observation) (lost int, examples []string, err error) {
	st, err := boltstore.Open(filepath.Join(data, "twice.db"))
	if err != nil {
		return 0, nil, err
	}
	defer st.Close()
	due, err := outbox.Undelivered(ctx, st, 0)
	if err != nil {
		return 0, nil, err
	}
	for _, it := range due {
		m, derr := outbox.Decode(it)
		if derr == nil && m.Kind == recovery.KindResume && m.Attempts == 0 {
			continue // a parked recovery's timer: the recovery is waiting, not lost
		}
		lost++
		why := ""
		if derr == nil && m.Attempts > 0 {
			why = fmt.Sprintf(" (%d attempts, last error: %s)", m.Attempts, m.LastError)
		}
		examples = append(examples, fmt.Sprintf("follow-on lost: outbox message %s never delivered%s", it.PK, why))
	}
	runs, err := asl.NewBoltStore(st.DB())
	if err != nil {
		return 0, nil, err
	}
	recs, err := runs.List(ctx, recoveryMachine)
	if err != nil {
		return 0, nil, err
	}
	started := map[string]bool{}
	for _, r := range recs {
		started[r.Execution.Name] = true
	}
	for _, o := range obs {
		if o.Status != provider.StatusDeclined {
			continue
		}
		p, err := payments.Get(ctx, st, o.ID)
		if errors.Is(err, payments.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		key := p.Invoice
		if key == "" {
			key = p.ID
		}
		if !started[recovery.ExecutionName(key, 1)] {
			lost++
			examples = append(examples, fmt.Sprintf("follow-on lost: payment %s ends declined with no recovery", o.ID))
		}
	}
	return lost, examples, nil
}
