package inprocess

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/runtwice/twice/shared/outbox"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/problem"
)

// ErrInjected is the failure an armed start_execution fault returns, standing in for a
// throttled StartExecution.
var ErrInjected = errors.New("inprocess: injected start_execution failure")

// faultyStarter is the local runner's StartExecution with faults an outside test can arm
// (POST /ops/_faults), so it can prove that a failed recovery start is retried from the outbox.
type faultyStarter struct {
	next asl.ExecutionStarter

	mu      sync.Mutex
	armed   int
	failed  int
	started int
}

func (f *faultyStarter) StartExecutionAt(ctx context.Context, machine, name string, input []byte, at time.Time) (asl.Execution, error) {
	f.mu.Lock()
	if f.armed > 0 {
		f.armed--
		f.failed++
		f.mu.Unlock()
		return asl.Execution{}, ErrInjected
	}
	f.mu.Unlock()
	ex, err := f.next.StartExecutionAt(ctx, machine, name, input, at)
	if err == nil {
		f.mu.Lock()
		f.started++
		f.mu.Unlock()
	}
	return ex, err
}

// FaultCounts is the answer of /ops/_faults: what is armed and what happened since the start.
type FaultCounts struct {
	Target  string `json:"target"`
	Armed   int    `json:"armed"`
	Failed  int    `json:"failed"`
	Started int    `json:"started"`
	// OutboxPending counts the outbox messages not delivered yet (due now or after a backoff),
	// so a test can wait for follow-on work to drain before it judges (at most 10,000 counted).
	// A parked recovery's timer that is not due yet is scheduled work and not counted.
	OutboxPending int `json:"outbox_pending"`
	// QueuePending counts the messages in the webhook and resolve queues (due or not), so a
	// test can tell a stack at rest from one whose consumers will still commit work.
	QueuePending int `json:"queue_pending"`
}

func (f *faultyStarter) counts() FaultCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultCounts{Target: "start_execution", Armed: f.armed, Failed: f.failed, Started: f.started}
}

// faultsHandler serves POST /ops/_faults {"target":"start_execution","count":N} (arm the next
// N recovery starts to fail) and GET /ops/_faults, behind the operator token. Local only.
func (s *Stack) faultsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.operator(w, r) {
			return
		}
		if r.Method == http.MethodPost {
			n, err := parseFaults(r.Body)
			if err != nil {
				problem.Error(w, http.StatusBadRequest, `The body must be {"target":"start_execution","count":0..1000}.`)
				return
			}
			s.starter.mu.Lock()
			s.starter.armed = n
			s.starter.mu.Unlock()
			s.log.Info("fault armed", "target", "start_execution", "count", n)
		}
		counts := s.starter.counts()
		counts.OutboxPending = s.outboxPending(r.Context())
		counts.QueuePending = s.queuePending()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(counts)
	})
}

var errFaultBody = errors.New("inprocess: bad fault body")

// parseFaults reads {"target":"start_execution","count":N} (0..1000), at most 4 KiB.
func parseFaults(body io.Reader) (int, error) {
	var req struct {
		Target string `json:"target"`
		Count  int    `json:"count"`
	}
	dec := json.NewDecoder(io.LimitReader(body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Target != "start_execution" || req.Count < 0 || req.Count > 1000 {
		return 0, errFaultBody
	}
	return req.Count, nil
}

// outboxPending counts the messages in the outbox's due index (-1 if it cannot be read).
// queuePending counts the messages in the main queues; -1 when one cannot be read.
func (s *Stack) queuePending() int {
	n := 0
	for _, name := range []string{webhookQueue, resolveQueue} {
		st, err := s.queues[name].Stats()
		if err != nil {
			return -1
		}
		n += st.Visible + st.NotVisible
	}
	return n
}

func (s *Stack) outboxPending(ctx context.Context) int {
	items, err := outbox.Undelivered(ctx, s.store, 0)
	if err != nil {
		return -1
	}
	n, now := 0, s.clock.Now()
	for _, it := range items {
		if m, err := outbox.Decode(it); err == nil && m.Waiting(now) {
			continue // a parked recovery's timer: scheduled work, not work pending
		}
		n++
	}
	return n
}
