package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/metrics"
	"github.com/runtwice/twice/shared/outbox"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// sent records every requeue.
type sent struct {
	mu   sync.Mutex
	ids  []string
	fail error
}

func (s *sent) Requeue(_ context.Context, _ deadletter.Target, retryID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.ids = append(s.ids, retryID)
	return nil
}

func (s *sent) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.ids) }

// env is one table with the Requeuer and the outbox relay that sends its retries.
type env struct {
	table   *deadletter.Records
	relay   *outbox.Relay
	clock   *clock
	sent    *sent
	metrics *bytes.Buffer
}

func newEnv(t testing.TB) env {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "dl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := &clock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	q := &sent{}
	var m bytes.Buffer
	quiet := slog.New(slog.DiscardHandler)
	tb := &deadletter.Records{Store: s, Requeuer: q, Now: c.Now,
		Log:     quiet,
		Metrics: &deadletter.EMF{Out: &metrics.EMF{W: &m}}}
	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{deadletter.KindRetry: tb.RetryFollowOn()},
		Now: c.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: quiet}
	return env{table: tb, relay: relay, clock: c, sent: q, metrics: &m}
}

// deliver runs the outbox relay over the retries committed so far, as outbox-relay does.
func (e env) deliver(t testing.TB) {
	t.Helper()
	if _, _, err := e.relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func webhookRecord(event string) deadletter.Record {
	body, _ := json.Marshal(map[string]string{"provider": "stripe", "event_id": event})
	return deadletter.Record{Source: deadletter.SourceWebhook, Key: "webhook:stripe:" + event,
		Cause: deadletter.CauseProcessing, EventID: event, Payload: body,
		Facts:  deadletter.Facts{EventID: event, Provider: "stripe", Deliveries: 5},
		Tries:  []deadletter.Try{{At: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), Error: "apply failed", MessageID: "m-" + event}},
		Target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: "webhooks", Body: body}}
}
