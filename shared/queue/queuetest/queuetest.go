package queuetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// MaxReceiveCount is the redrive policy every fixture's queue must have.
const MaxReceiveCount = 3

// Fixture is one fresh, empty queue and its dead-letter queue.
type Fixture struct {
	// Queue redrives to DLQ after MaxReceiveCount receives.
	Queue queue.Queue
	DLQ   queue.Queue
	// Now reads the queues' clock.
	Now func() time.Time
	// Advance lets d pass on the queues' clock: a fake clock moves, a real one is waited out.
	Advance func(d time.Duration)
}

// Suite describes an implementation to the suite.
type Suite struct {
	New func(t *testing.T) Fixture
	// RedriveSlack is how many receives past maxReceiveCount may still return the message
	// before it must have moved. SQS promises the move once the count exceeds maxReceiveCount,
	// not on which receive; moto under load has answered one more. The local queue moves it on
	// exactly the next receive (0).
	RedriveSlack int
	// Sequential runs the cases one after another: moto's SQS, busy with a whole test run
	// beside it, mixed up concurrent cases' messages now and then.
	Sequential bool
	// Tick is the unit of every visibility timeout and delay in the suite (1 s for SQS).
	Tick time.Duration
	// StaleReceiptDeletes says what Delete does with a receipt from an earlier receive of a
	// message that was received again: true if it deletes (moto), false if it refuses with
	// queue.ErrStaleReceipt and keeps the message (the local queue).
	StaleReceiptDeletes bool
	// DuplicatesInFlight says the queue may hand out a message again while a receive of it is
	// still in flight: SQS standard queues promise at least once, not exactly once, and moto
	// under a full test run has done it. The cases that check an in-flight message stays hidden
	// then start again on a new queue when it happens (at most three tries). The local queue
	// never does (false). ConcurrentReceiversNeverShare then only checks that every message
	// reached some receiver, and logs the duplicates.
	DuplicatesInFlight bool
	// ExpectWait is how long a receive that expects a message may long-poll for it. moto, on a
	// machine busy with a whole test run, makes a message visible again a moment after its
	// visibility ends, and a receive without a wait then comes back empty; the local queue has
	// it at once (0).
	ExpectWait time.Duration
}

// Run runs the contract suite; every case gets its own fixture and runs in parallel.
func Run(t *testing.T, s Suite) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Suite, f Fixture)
	}{
		{"SendReceiveDelete", testSendReceiveDelete},
		{"AtLeastOnce", testAtLeastOnce},
		{"StaleReceipt", testStaleReceipt},
		{"ChangeVisibility", testChangeVisibility},
		{"Delay", testDelay},
		{"RedriveToDLQ", testRedrive},
		{"ConcurrentReceiversNeverShare", testConcurrentReceivers},
		{"LongPollWakesOnSend", testLongPollWakesOnSend},
		{"ConsumerBatchFailures", testConsumerBatchFailures},
		{"DeleteBatch", testDeleteBatch},
		{"Invalid", testInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !s.Sequential {
				t.Parallel()
			}
			tc.fn(t, s, s.New(t))
		})
	}
}

// half is the margin the suite waits past a deadline, so a real-time server is surely past it.
func (s Suite) past(ticks int) time.Duration { return time.Duration(ticks)*s.Tick + s.Tick/2 }

func send(t *testing.T, q queue.Queue, body string, attrs map[string]string) string {
	t.Helper()
	id, err := q.Send(context.Background(), []byte(body), queue.SendOptions{Attributes: attrs})
	if err != nil {
		t.Fatalf("send %q: %v", body, err)
	}
	if id == "" {
		t.Fatalf("send %q: empty message id", body)
	}
	return id
}

func receive(t *testing.T, q queue.Queue, max int, vis time.Duration) []queue.Message {
	t.Helper()
	msgs, err := q.Receive(context.Background(), max, vis, 0)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return msgs
}

// receiveOne receives the one message a case expects, long-polling up to s.ExpectWait for it.
func receiveOne(t *testing.T, s Suite, q queue.Queue, vis time.Duration) queue.Message {
	t.Helper()
	msgs, err := q.Receive(context.Background(), 1, vis, s.ExpectWait)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("receive: got %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

// receiveN receives the n messages a case expects, long-polling up to s.ExpectWait for each
// call: a short poll may answer with fewer than are there (SQS samples its servers, and a busy
// moto can be late), so one short receive is no proof of what the queue holds.
func receiveN(t *testing.T, s Suite, q queue.Queue, n int, vis time.Duration) []queue.Message {
	t.Helper()
	var out []queue.Message
	for try := 0; len(out) < n && try < n; try++ {
		msgs, err := q.Receive(context.Background(), n-len(out), vis, s.ExpectWait)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		out = append(out, msgs...)
	}
	return out
}

func receiveNone(t *testing.T, q queue.Queue, why string) {
	t.Helper()
	if msgs := receive(t, q, 10, time.Minute); len(msgs) != 0 {
		t.Fatalf("%s: received %d messages (first %q), want none", why, len(msgs), msgs[0].Body)
	}
}

func testSendReceiveDelete(t *testing.T, s Suite, f Fixture) {
	ctx := context.Background()
	before := f.Now()
	attrs := map[string]string{"provider": "stripe", "Stripe-Signature": "t=1,v1=ab ü"}
	body := `{"id":"evt_1","type":"payment_intent.succeeded","ü":"✓"}`
	id := send(t, f.Queue, body, attrs)
	plain := send(t, f.Queue, "second", nil)
	after := f.Now()

	msgs := receiveN(t, s, f.Queue, 2, s.Tick)
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	byID := map[string]queue.Message{msgs[0].ID: msgs[0], msgs[1].ID: msgs[1]}
	m, ok := byID[id]
	if !ok {
		t.Fatalf("message %s not received; got %v", id, maps.Keys(byID))
	}
	if string(m.Body) != body || !maps.Equal(m.Attributes, attrs) {
		t.Fatalf("got body %q attrs %v, want %q %v", m.Body, m.Attributes, body, attrs)
	}
	if m.ReceiveCount != 1 || m.ReceiptHandle == "" {
		t.Fatalf("first receive: count %d, receipt %q", m.ReceiveCount, m.ReceiptHandle)
	}
	// SQS reports SentTimestamp in milliseconds.
	if m.SentAt.Before(before.Add(-time.Second)) || m.SentAt.After(after.Add(time.Second)) {
		t.Fatalf("SentAt %v outside [%v, %v]", m.SentAt, before, after)
	}
	if p := byID[plain]; len(p.Attributes) != 0 || string(p.Body) != "second" {
		t.Fatalf("plain message: %+v", p)
	}
	for _, m := range msgs {
		if err := f.Queue.Delete(ctx, m.ReceiptHandle); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if err := f.Queue.Delete(ctx, m.ReceiptHandle); err != nil {
		t.Fatalf("second delete of a deleted message: %v, want nil", err)
	}
	f.Advance(s.past(1))
	receiveNone(t, f.Queue, "after delete and visibility timeout")
}

func testAtLeastOnce(t *testing.T, s Suite, f Fixture) {
	for try := 1; !atLeastOnce(t, s, f); try++ {
		if !s.DuplicatesInFlight || try == 3 {
			t.Fatalf("try %d: the in-flight message was delivered again", try)
		}
		t.Logf("try %d: the queue delivered the in-flight message again (a standard queue may); trying on a new queue", try)
		f = s.New(t)
	}
}

// atLeastOnce is one try of testAtLeastOnce; it reports false when the queue handed out the
// in-flight message again (never another message: that fails the test).
func atLeastOnce(t *testing.T, s Suite, f Fixture) bool {
	id := send(t, f.Queue, "retry me", nil)
	first := receiveOne(t, s, f.Queue, s.Tick)
	if msgs := receive(t, f.Queue, 10, time.Minute); len(msgs) != 0 {
		for _, m := range msgs {
			if m.ID != id {
				t.Fatalf("while in flight: received %s %q, a message never sent to this queue", m.ID, m.Body)
			}
		}
		return false
	}
	f.Advance(s.past(1))
	again := receiveOne(t, s, f.Queue, s.Tick)
	if again.ID != id || first.ID != id || string(again.Body) != "retry me" {
		t.Fatalf("redelivered %s %q, want %s", again.ID, again.Body, id)
	}
	if again.ReceiveCount != 2 {
		t.Fatalf("ReceiveCount %d after redelivery, want 2", again.ReceiveCount)
	}
	if again.ReceiptHandle == first.ReceiptHandle {
		t.Fatal("redelivery reused the receipt handle")
	}
	return true
}

func testStaleReceipt(t *testing.T, s Suite, f Fixture) {
	ctx := context.Background()
	send(t, f.Queue, "contested", nil)
	first := receiveOne(t, s, f.Queue, s.Tick)
	f.Advance(s.past(1))
	second := receiveOne(t, s, f.Queue, s.Tick)

	err := f.Queue.Delete(ctx, first.ReceiptHandle)
	if s.StaleReceiptDeletes {
		if err != nil {
			t.Fatalf("delete with stale receipt: %v", err)
		}
		if err := f.Queue.ChangeVisibility(ctx, second.ReceiptHandle, 0); !errors.Is(err, queue.ErrReceiptInvalid) {
			t.Fatalf("change visibility of a deleted message: %v, want ErrReceiptInvalid", err)
		}
		receiveNone(t, f.Queue, "after delete with stale receipt")
		return
	}
	if !errors.Is(err, queue.ErrStaleReceipt) || !errors.Is(err, queue.ErrReceiptInvalid) {
		t.Fatalf("delete with stale receipt: %v, want ErrStaleReceipt", err)
	}
	// The current holder still owns it.
	if err := f.Queue.ChangeVisibility(ctx, second.ReceiptHandle, 0); err != nil {
		t.Fatalf("change visibility with current receipt: %v", err)
	}
	if m := receiveOne(t, s, f.Queue, s.Tick); m.ID != first.ID || m.ReceiveCount != 3 {
		t.Fatalf("after refused stale delete got %s count %d, want %s count 3", m.ID, m.ReceiveCount, first.ID)
	}
}

func testChangeVisibility(t *testing.T, s Suite, f Fixture) {
	ctx := context.Background()
	id := send(t, f.Queue, "backoff", nil)
	m := receiveOne(t, s, f.Queue, 30*s.Tick)
	// Zero makes it visible at once: a consumer giving a message back.
	if err := f.Queue.ChangeVisibility(ctx, m.ReceiptHandle, 0); err != nil {
		t.Fatalf("change visibility to 0: %v", err)
	}
	m = receiveOne(t, s, f.Queue, s.Tick)
	if m.ID != id || m.ReceiveCount != 2 {
		t.Fatalf("got %s count %d, want %s count 2", m.ID, m.ReceiveCount, id)
	}
	// Pushing it later (a consumer's backoff) outlasts the visibility it was received with.
	if err := f.Queue.ChangeVisibility(ctx, m.ReceiptHandle, 3*s.Tick); err != nil {
		t.Fatalf("extend visibility: %v", err)
	}
	f.Advance(s.past(1))
	receiveNone(t, f.Queue, "after the original visibility, before the extended one")
	f.Advance(2 * s.Tick)
	if m := receiveOne(t, s, f.Queue, s.Tick); m.ID != id || m.ReceiveCount != 3 {
		t.Fatalf("after extended visibility got %s count %d, want %s count 3", m.ID, m.ReceiveCount, id)
	}
	for name, receipt := range map[string]string{"empty": "", "garbage": "not-a-receipt"} {
		if err := f.Queue.ChangeVisibility(ctx, receipt, s.Tick); !errors.Is(err, queue.ErrReceiptInvalid) {
			t.Errorf("%s receipt: %v, want ErrReceiptInvalid", name, err)
		}
	}
}

func testDelay(t *testing.T, s Suite, f Fixture) {
	id, err := f.Queue.Send(context.Background(), []byte("later"), queue.SendOptions{Delay: s.Tick})
	if err != nil {
		t.Fatal(err)
	}
	receiveNone(t, f.Queue, "before the delay")
	f.Advance(s.past(1))
	if m := receiveOne(t, s, f.Queue, s.Tick); m.ID != id || m.ReceiveCount != 1 {
		t.Fatalf("after delay got %s count %d, want %s count 1", m.ID, m.ReceiveCount, id)
	}
}

func testRedrive(t *testing.T, s Suite, f Fixture) {
	attrs := map[string]string{"event-id": "evt_poison", "provider": "stripe"}
	id := send(t, f.Queue, `{"poison":true}`, attrs)
	for i := 1; i <= MaxReceiveCount; i++ {
		if m := receiveOne(t, s, f.Queue, s.Tick); m.ReceiveCount != i {
			t.Fatalf("receive %d: ReceiveCount %d", i, m.ReceiveCount)
		}
		f.Advance(s.past(1))
	}
	// The receive that would exceed maxReceiveCount moves it instead (give or take the slack).
	for extra := 0; ; extra++ {
		msgs := receive(t, f.Queue, 10, s.Tick)
		if len(msgs) == 0 {
			break
		}
		if extra >= s.RedriveSlack {
			t.Fatalf("after %d receives past maxReceiveCount: received %d messages (first %q), want none",
				extra+1, len(msgs), msgs[0].Body)
		}
		f.Advance(s.past(1))
	}
	// Long-poll the dead-letter queue: SQS (and moto under load) may take a moment to show the
	// moved message; the local queue has it at once and answers without waiting.
	msgs, err := f.DLQ.Receive(context.Background(), 1, s.Tick, 5*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("dead-letter queue: got %d messages (%v), want 1", len(msgs), err)
	}
	d := msgs[0]
	if d.ID != id || string(d.Body) != `{"poison":true}` || !maps.Equal(d.Attributes, attrs) {
		t.Fatalf("dead letter %s %q %v, want %s with body and attributes intact", d.ID, d.Body, d.Attributes, id)
	}
	if d.ReceiveCount <= MaxReceiveCount {
		t.Fatalf("dead letter ReceiveCount %d, want above %d", d.ReceiveCount, MaxReceiveCount)
	}
}

func testConcurrentReceivers(t *testing.T, s Suite, f Fixture) {
	const n, receivers = 40, 5
	sent := make(map[string]bool, n)
	for i := range n {
		sent[send(t, f.Queue, fmt.Sprintf("m%d", i), nil)] = true
	}
	if len(sent) != n {
		t.Fatalf("%d distinct ids for %d sends", len(sent), n)
	}
	var mu sync.Mutex
	got := make(map[string]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, receivers)
	for range receivers {
		wg.Go(func() {
			for {
				msgs, err := f.Queue.Receive(context.Background(), 3, 60*s.Tick, 0)
				if err != nil {
					errs <- err
					return
				}
				if len(msgs) == 0 {
					return
				}
				mu.Lock()
				for _, m := range msgs {
					got[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("receive: %v", err)
	}
	ours, dups := 0, 0
	for id, c := range got {
		if !sent[id] {
			// moto, under a full test run, once handed this queue a message of another queue
			// of the same server; that is the fake's fault, not the adapter's.
			t.Logf("message %s was never sent to this queue; ignored", id)
			continue
		}
		ours++
		if c == 1 {
			continue
		}
		if !s.DuplicatesInFlight {
			t.Fatalf("message %s received %d times", id, c)
		}
		// A standard queue promises at least once: moto, serving five receivers at once
		// under a full test run, has handed one message to two of them.
		dups += c - 1
	}
	if dups > 0 {
		t.Logf("%d duplicate deliveries among %d receivers (a standard queue may)", dups, receivers)
	}
	if ours != n {
		t.Fatalf("received %d distinct messages of the %d sent", ours, n)
	}
}

func testLongPollWakesOnSend(t *testing.T, s Suite, f Fixture) {
	type result struct {
		msgs []queue.Message
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := f.Queue.Receive(context.Background(), 1, s.Tick, queue.MaxWait)
		done <- result{msgs, err}
	}()
	id := send(t, f.Queue, "wake up", nil)
	// No clock advance: only the send can end this wait before MaxWait.
	r := <-done
	if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != id {
		t.Fatalf("long poll got %v, %v; want message %s", r.msgs, r.err, id)
	}
}

func testConsumerBatchFailures(t *testing.T, s Suite, f Fixture) {
	ctx := context.Background()
	for _, b := range []string{"ok-1", "fail-2", "ok-3", "fail-4"} {
		send(t, f.Queue, b, map[string]string{"n": b})
	}
	var mu sync.Mutex
	seen := map[string][]string{} // body -> ApproximateReceiveCount of each delivery
	const source = "arn:aws:sqs:us-east-1:000000000000:test"
	// The per-message func every consumer of twice is, through the one adapter (sqsbatch) that
	// Lambda and the local stack both run.
	handle := func(_ context.Context, m queue.Message) error {
		mu.Lock()
		defer mu.Unlock()
		body := string(m.Body)
		seen[body] = append(seen[body], strconv.Itoa(m.ReceiveCount))
		if m.Attributes["n"] != body || m.Source != source || m.SentAt.IsZero() {
			return sqsbatch.FailBatch(fmt.Errorf("message %q: attributes %v, source %q, sent %v", body, m.Attributes, m.Source, m.SentAt))
		}
		// First deliveries of "fail" messages fail; their redeliveries succeed.
		if strings.HasPrefix(body, "fail") && len(seen[body]) == 1 {
			return errors.New("first delivery fails")
		}
		return nil
	}
	// Five ticks of visibility: on a queue that runs on the wall clock (moto, 1 s ticks), a
	// first pass that takes longer than one tick on a busy machine would otherwise see its
	// failures come back before it ends.
	c := &queue.Consumer{
		Queue: f.Queue, Visibility: 5 * s.Tick, Wait: time.Second, SourceARN: source,
		Handler: (&sqsbatch.Batch{Each: handle, Log: slog.New(slog.DiscardHandler)}).Handle,
	}
	total := queue.BatchResult{}
	for total.Received < 4 {
		r, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Received == 0 {
			t.Fatalf("poll found no messages after %d", total.Received)
		}
		total = queue.BatchResult{Received: total.Received + r.Received, Deleted: total.Deleted + r.Deleted, Failed: total.Failed + r.Failed}
	}
	if total != (queue.BatchResult{Received: 4, Deleted: 2, Failed: 2}) {
		t.Fatalf("first pass: %+v, want 4 received, 2 deleted, 2 failed", total)
	}
	receiveNone(t, f.Queue, "failures before their visibility timeout")
	f.Advance(s.past(5))
	r, err := c.Poll(ctx)
	if err != nil || r != (queue.BatchResult{Received: 2, Deleted: 2}) {
		t.Fatalf("redelivery pass: %+v, %v; want the 2 failures received and deleted", r, err)
	}
	for body, counts := range seen {
		want := []string{"1"}
		if strings.HasPrefix(body, "fail") {
			want = []string{"1", "2"}
		}
		if strings.Join(counts, ",") != strings.Join(want, ",") {
			t.Errorf("%s delivered with receive counts %v, want %v", body, counts, want)
		}
	}
	f.Advance(s.past(1))
	receiveNone(t, f.Queue, "after every message succeeded")
}

func testDeleteBatch(t *testing.T, s Suite, f Fixture) {
	bd, ok := f.Queue.(queue.BatchDeleter)
	if !ok {
		t.Skip("not a queue.BatchDeleter")
	}
	ctx := context.Background()
	for _, b := range []string{"a", "b", "c"} {
		send(t, f.Queue, b, nil)
	}
	// A standard queue delivers at least once: a receive may carry one message twice (the same
	// id). Keep one delivery per message, and only the three sent here.
	var msgs []queue.Message
	seenID := map[string]bool{}
	for _, m := range receive(t, f.Queue, 10, 30*s.Tick) {
		switch b := string(m.Body); {
		case seenID[m.ID]:
		case b == "a" || b == "b" || b == "c":
			seenID[m.ID] = true
			msgs = append(msgs, m)
		default:
			t.Logf("received %q, which this case never sent (left by another case); ignored", b)
		}
	}
	if len(msgs) != 3 {
		t.Fatalf("received %d of the 3 messages", len(msgs))
	}
	errs, err := bd.DeleteBatch(ctx, []string{msgs[0].ReceiptHandle, "not-a-receipt", msgs[1].ReceiptHandle})
	if err != nil || len(errs) != 3 {
		t.Fatalf("DeleteBatch: %v, %v", errs, err)
	}
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], queue.ErrReceiptInvalid) {
		t.Fatalf("DeleteBatch results %v, want nil, ErrReceiptInvalid, nil", errs)
	}
	// Only the third message is left: make it visible and find it alone.
	if err := f.Queue.ChangeVisibility(ctx, msgs[2].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	var left []queue.Message
	for _, m := range receive(t, f.Queue, 10, s.Tick) {
		if len(left) == 0 || m.ID != left[0].ID { // at least once: a duplicate delivery is one
			left = append(left, m)
		}
	}
	if len(left) != 1 || left[0].ID != msgs[2].ID {
		t.Fatalf("after DeleteBatch left %d messages, want only %s", len(left), msgs[2].ID)
	}
	if _, err := bd.DeleteBatch(ctx, nil); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("empty DeleteBatch: %v, want ErrInvalid", err)
	}
}

func testInvalid(t *testing.T, s Suite, f Fixture) {
	ctx := context.Background()
	cases := map[string]func() error{
		"max 0":       func() error { _, err := f.Queue.Receive(ctx, 0, s.Tick, 0); return err },
		"max 11":      func() error { _, err := f.Queue.Receive(ctx, 11, s.Tick, 0); return err },
		"wait 21s":    func() error { _, err := f.Queue.Receive(ctx, 1, s.Tick, 21*time.Second); return err },
		"visibility":  func() error { _, err := f.Queue.Receive(ctx, 1, 13*time.Hour, 0); return err },
		"empty body":  func() error { _, err := f.Queue.Send(ctx, nil, queue.SendOptions{}); return err },
		"binary body": func() error { _, err := f.Queue.Send(ctx, []byte{0, 1, 2}, queue.SendOptions{}); return err },
		"delay 16m": func() error {
			_, err := f.Queue.Send(ctx, []byte("x"), queue.SendOptions{Delay: 16 * time.Minute})
			return err
		},
		"empty attr": func() error {
			_, err := f.Queue.Send(ctx, []byte("x"), queue.SendOptions{Attributes: map[string]string{"a": ""}})
			return err
		},
		"change neg":   func() error { return f.Queue.ChangeVisibility(ctx, "x", -time.Second) },
		"receipt junk": func() error { return invalidAsInvalid(f.Queue.Delete(ctx, "%%%")) },
	}
	for name, fn := range cases {
		if err := fn(); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// invalidAsInvalid lets one table hold the receipt case: a malformed receipt is
// ErrReceiptInvalid, which the table reads as invalid.
func invalidAsInvalid(err error) error {
	if errors.Is(err, queue.ErrReceiptInvalid) {
		return queue.ErrInvalid
	}
	return fmt.Errorf("%v (not ErrReceiptInvalid)", err)
}
