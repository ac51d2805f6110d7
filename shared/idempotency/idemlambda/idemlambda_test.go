package idemlambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/idempotency/idemlambda"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

var quiet = slog.New(slog.DiscardHandler)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func keeper(t testing.TB) (*idempotency.Keeper, *clock) {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "i.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Now: c.Now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return k, c
}

type orderEvent struct {
	Order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	} `json:"order"`
	TraceID string `json:"trace_id"`
}

func ev(id string, amount int, trace string) orderEvent {
	var e orderEvent
	e.Order.ID, e.Order.Amount, e.TraceID = id, amount, trace
	return e
}

type receipt struct {
	Charged  int  `json:"charged"`
	Replayed bool `json:"replayed,omitempty"`
}

func TestWrapKeyValidationAndHook(t *testing.T) {
	k, _ := keeper(t)
	runs := 0
	h, err := idemlambda.Wrap(idemlambda.Config[receipt]{
		Keeper: k, KeyPath: "$.order.id", ValidationPath: "$.order.amount", KeyPrefix: "charge",
		ResponseHook: func(_ context.Context, r receipt, out idempotency.Outcome) receipt {
			r.Replayed = out.Kind == idempotency.Replay
			return r
		},
	}, func(_ context.Context, e orderEvent) (receipt, error) {
		runs++
		return receipt{Charged: e.Order.Amount}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := h(ctx, ev("o-1", 500, "a"))
	if err != nil || first != (receipt{Charged: 500}) {
		t.Fatal(first, err)
	}
	// Another trace id is outside both paths: the same request, replayed through the hook.
	again, err := h(ctx, ev("o-1", 500, "b"))
	if err != nil || again != (receipt{Charged: 500, Replayed: true}) || runs != 1 {
		t.Fatal(again, err, runs)
	}
	// The validated payload differs: refused, not replayed.
	if _, err := h(ctx, ev("o-1", 600, "c")); !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("another amount: %v", err)
	}
	// Another key runs.
	if r, err := h(ctx, ev("o-2", 600, "c")); err != nil || r.Charged != 600 || runs != 2 {
		t.Fatal(r, err, runs)
	}
}

func TestWrapMissingKey(t *testing.T) {
	k, _ := keeper(t)
	runs := 0
	inner := func(context.Context, json.RawMessage) (string, error) { runs++; return "ok", nil }
	raise, err := idemlambda.Wrap(idemlambda.Config[string]{Keeper: k, KeyPath: "$.id", RaiseOnMissingKey: true}, inner)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{`{}`, `{"id":null}`} {
		if _, err := raise(context.Background(), json.RawMessage(e)); !errors.Is(err, idemlambda.ErrNoKey) {
			t.Fatalf("%s: %v", e, err)
		}
	}
	if runs != 0 {
		t.Fatal("raised but ran")
	}
	pass, err := idemlambda.Wrap(idemlambda.Config[string]{Keeper: k, KeyPath: "$.id", Log: quiet}, inner)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r, err := pass(context.Background(), json.RawMessage(`{"other":1}`)); err != nil || r != "ok" {
			t.Fatal(r, err)
		}
	}
	if runs != 2 {
		t.Fatalf("pass-through ran %d times, want every time", runs)
	}
	if _, err := idemlambda.Wrap(idemlambda.Config[string]{Keeper: k, KeyPath: "$[?"}, inner); err == nil {
		t.Fatal("a bad path compiled")
	}
	if _, err := pass(context.Background(), json.RawMessage(`{`)); err == nil {
		t.Fatal("a broken event ran")
	}
}

// The in-progress lock lasts until the Lambda deadline plus the Keeper's LockMargin (5 s): a
// repeat before then is refused, one after may take the key over (the first invocation can no
// longer be running).
func TestWrapInProgressExpiryFollowsTheDeadline(t *testing.T) {
	k, c := keeper(t)
	var h func(context.Context, json.RawMessage) (string, error)
	var inner []error
	depth := 0
	h, err := idemlambda.Wrap(idemlambda.Config[string]{Keeper: k, KeyPath: "$.id"}, func(ctx context.Context, e json.RawMessage) (string, error) {
		depth++
		if depth == 1 {
			// While this invocation holds the key: a repeat now, then one after the deadline.
			_, err := h(context.Background(), e)
			inner = append(inner, err)
			c.Advance(10*time.Second + 5*time.Second + time.Second)
			_, err = h(context.Background(), e)
			inner = append(inner, err)
		}
		return fmt.Sprint("run ", depth), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h(ctx, json.RawMessage(`{"id":"x"}`)); !errors.Is(err, idempotency.ErrLeaseLost) {
		// the taker completed first: the first invocation's lease is fenced off
		t.Fatalf("first invocation after the takeover: %v", err)
	}
	var ip *idempotency.InProgressError
	if len(inner) != 2 || !errors.As(inner[0], &ip) || ip.RetryAfter <= 0 || inner[1] != nil || depth != 2 {
		t.Fatalf("inner calls: %v (depth %d)", inner, depth)
	}
}

func sqsMsg(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:1:jobs"}
}

func failures(r events.SQSEventResponse) []string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestSQSBatch(t *testing.T) {
	k, _ := keeper(t)
	runs := map[string]int{}
	fail := map[string]bool{"m2": true}
	h, err := idemlambda.SQS(idemlambda.Config[struct{}]{Keeper: k, Log: quiet}, func(_ context.Context, m events.SQSMessage) error {
		runs[m.MessageId]++
		if fail[m.MessageId] {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", "a"), sqsMsg("m2", "b"), sqsMsg("m1", "a"), sqsMsg("m3", `{"x":1}`)}}
	resp, err := h(context.Background(), batch)
	if err != nil || fmt.Sprint(failures(resp)) != "[m2]" {
		t.Fatal(failures(resp), err)
	}
	if runs["m1"] != 1 || runs["m2"] != 1 || runs["m3"] != 1 {
		t.Fatalf("runs %v: a duplicate in the batch ran again", runs)
	}
	// Redelivery: the completed records are not run again, the failed one is.
	fail["m2"] = false
	resp, err = h(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 0 || runs["m1"] != 1 || runs["m2"] != 2 || runs["m3"] != 1 {
		t.Fatal(failures(resp), err, runs)
	}
}

// The key path sees the body decoded: two messages carrying the same job are one.
func TestSQSKeyFromTheBody(t *testing.T) {
	k, _ := keeper(t)
	runs := 0
	h, err := idemlambda.SQS(idemlambda.Config[struct{}]{Keeper: k, KeyPath: "$.body.job", RaiseOnMissingKey: true}, func(context.Context, events.SQSMessage) error {
		runs++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		sqsMsg("a", `{"job":"j-1","n":1}`), sqsMsg("b", `{"job":"j-1","n":2}`), sqsMsg("c", `not json`),
	}})
	if runs != 1 || fmt.Sprint(failures(resp)) != "[c]" {
		t.Fatal(runs, failures(resp))
	}
}

// A FIFO batch keeps its order: after a failed record the rest are reported without running.
func TestSQSFIFOStopsAtTheFirstFailure(t *testing.T) {
	k, _ := keeper(t)
	var ran []string
	h, err := idemlambda.SQS(idemlambda.Config[struct{}]{Keeper: k, Log: quiet}, func(_ context.Context, m events.SQSMessage) error {
		ran = append(ran, m.MessageId)
		if m.MessageId == "f2" {
			return errors.New("no")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var recs []events.SQSMessage
	for _, id := range []string{"f1", "f2", "f3", "f4"} {
		m := sqsMsg(id, "x")
		m.EventSourceARN += ".fifo"
		recs = append(recs, m)
	}
	resp, _ := h(context.Background(), events.SQSEvent{Records: recs})
	if fmt.Sprint(ran) != "[f1 f2]" || fmt.Sprint(failures(resp)) != "[f2 f3 f4]" {
		t.Fatal(ran, failures(resp))
	}
}

// Message keys a plain message as SQS keys its record: a message completed through one is
// replayed through the other, and sqsbatch runs it in a batch like SQS does.
func TestMessageKeysAsSQSDoes(t *testing.T) {
	k, _ := keeper(t)
	runs := map[string]int{}
	run := func(id string) error {
		runs[id]++
		if id == "m2" && runs[id] == 1 {
			return errors.New("not yet")
		}
		return nil
	}
	batch, err := idemlambda.SQS(idemlambda.Config[struct{}]{Keeper: k, KeyPrefix: "jobs", Log: quiet},
		func(_ context.Context, m events.SQSMessage) error { return run(m.MessageId) })
	if err != nil {
		t.Fatal(err)
	}
	one, err := idemlambda.Message(idemlambda.Config[struct{}]{Keeper: k, KeyPrefix: "jobs", Log: quiet},
		func(_ context.Context, m queue.Message) error { return run(m.ID) })
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := batch(context.Background(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", "a")}}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatal(failures(resp), err)
	}
	// m1 completed through SQS: not run again as a plain message. m2 fails once, then runs.
	plain := (&sqsbatch.Batch{Each: one, Log: quiet}).Handle
	ev := events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", "a"), sqsMsg("m2", "b")}}
	if resp, err := plain(context.Background(), ev); err != nil || fmt.Sprint(failures(resp)) != "[m2]" {
		t.Fatal(failures(resp), err)
	}
	if resp, err := plain(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatal(failures(resp), err)
	}
	if runs["m1"] != 1 || runs["m2"] != 2 {
		t.Fatalf("runs %v", runs)
	}
	if _, err := idemlambda.Message(idemlambda.Config[struct{}]{}, func(context.Context, queue.Message) error { return nil }); err == nil {
		t.Fatal("no Keeper: no error")
	}
}

// Any bytes as an event: an answer or an error, never a panic.
func FuzzWrap(f *testing.F) {
	k, _ := keeper(f)
	h, err := idemlambda.Wrap(idemlambda.Config[int]{Keeper: k, KeyPath: "$..id", ValidationPath: "$.a", Log: quiet},
		func(context.Context, json.RawMessage) (int, error) { return 1, nil })
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"id":"x"}`, `{"a":{"id":[1,2]}}`, `[]`, `null`, `{"id":"` + string(make([]byte, 300)) + `"}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = h(context.Background(), json.RawMessage(b))
	})
}
