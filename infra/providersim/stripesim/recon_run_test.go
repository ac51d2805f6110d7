package stripesim_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/recon"
)

// flakySink fails the first n Opens, then records.
type flakySink struct {
	mu     sync.Mutex
	fail   int
	opened []string
}

var errSinkDown = errors.New("dead-letter table unavailable")

func (s *flakySink) Open(_ context.Context, d recon.Difference) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errSinkDown
	}
	s.opened = append(s.opened, d.Key)
	return nil
}

// A run whose sink fails stores no report; the retry of the same window opens what the first
// could not, and nothing twice.
func TestSinkFailureIsRetriedByTheSameWindow(t *testing.T) {
	e := newEnv(t)
	for _, amount := range []int64{100, 200} {
		e.sim("POST", "/_sim/payment_intents", map[string]any{"amount": amount, "currency": "usd"}, nil)
	}
	sink := &flakySink{fail: 1}
	rec := &recon.Reconciler{Store: e.store, Provider: e.prov, Sink: sink, Now: e.clock.Now, Log: slog.New(slog.DiscardHandler)}
	e.clock.Advance(time.Hour)
	w := rec.DefaultWindow()
	if _, err := rec.Run(context.Background(), w); !errors.Is(err, errSinkDown) {
		t.Fatalf("first run: %v, want the sink's error", err)
	}
	if _, err := recon.GetReport(context.Background(), e.store, w.RunID()); !errors.Is(err, recon.ErrNoReport) {
		t.Fatalf("a failed run stored a report: %v", err)
	}
	rep, err := rec.Run(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed || rep.Found[recon.MissingLocally] != 2 || len(sink.opened) != 2 || sink.opened[0] == sink.opened[1] {
		t.Fatalf("retry: found %v opened %v (keys %v)", rep.Found, rep.Opened, sink.opened)
	}
	// Forget lets a difference that is still there be reported again.
	if err := recon.Forget(context.Background(), e.store, sink.opened[0]); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if rep, err := rec.Run(context.Background(), rec.DefaultWindow()); err != nil || rep.Opened[recon.MissingLocally] != 1 || len(sink.opened) != 3 {
		t.Fatalf("after Forget: %+v, %v, %d opened", rep.Opened, err, len(sink.opened))
	}
}

// Handle serves the schedule's fixed input and an on-demand explicit window.
func TestHandle(t *testing.T) {
	e := newEnv(t)
	e.sim("POST", "/_sim/payment_intents", map[string]any{"amount": 300, "currency": "usd"}, nil)
	e.clock.Advance(2 * time.Hour)
	ctx := context.Background()

	rep, err := e.rec.Handle(ctx, json.RawMessage(`{"window_hours":25,"end_offset_minutes":5}`))
	if err != nil || rep.Found[recon.MissingLocally] != 1 {
		t.Fatalf("scheduled: %+v, %v", rep.Found, err)
	}
	if want := recon.DefaultWindow(e.clock.Now(), 25, 5*time.Minute).RunID(); rep.RunID != want {
		t.Fatalf("run id %s, want %s", rep.RunID, want)
	}
	from := e.clock.Now().Add(-3 * time.Hour).Format(time.RFC3339)
	to := e.clock.Now().Add(-time.Hour).Format(time.RFC3339)
	od, err := e.rec.Handle(ctx, json.RawMessage(`{"from":"`+from+`","to":"`+to+`"}`))
	if err != nil || od.RunID == rep.RunID || od.Found[recon.MissingLocally] != 1 || od.Opened[recon.MissingLocally] != 0 {
		t.Fatalf("on demand: %+v, %v", od, err)
	}
	if _, err := e.rec.Handle(ctx, json.RawMessage(`{"window_hours":"x"}`)); !errors.Is(err, recon.ErrBadEvent) {
		t.Fatalf("bad event: %v", err)
	}
	// The Scheduler's retry, minutes later, names the same scheduled time: the same run.
	input := json.RawMessage(`{"window_hours":25,"end_offset_minutes":5,"scheduled_time":"` +
		e.clock.Now().Add(-time.Hour).Truncate(time.Hour).Format(time.RFC3339) + `"}`)
	first, err := e.rec.Handle(ctx, input)
	if err != nil || first.Replayed {
		t.Fatalf("scheduled run: %+v, %v", first, err)
	}
	e.clock.Advance(7 * time.Minute)
	retry, err := e.rec.Handle(ctx, input)
	if err != nil || !retry.Replayed || retry.RunID != first.RunID {
		t.Fatalf("retry of the scheduled run: %+v, %v; want a replay of %s", retry, err, first.RunID)
	}
	reports, _, err := recon.ListReports(ctx, e.store, 10, "")
	if err != nil || len(reports) != 3 || !reports[0].Window.To.After(reports[1].Window.To) {
		t.Fatalf("ListReports: %d reports, %v", len(reports), err)
	}
}
