package localqueue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
)

func mustQueue(t testing.TB, b *Broker, name string, cfg Config) *Queue {
	t.Helper()
	q, err := b.Queue(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestLongPollTimesOutOnTheClock(t *testing.T) {
	clock := clock.NewFake(epoch)
	q := mustQueue(t, newBroker(t, clock), "q", Config{})
	done := make(chan error, 1)
	go func() {
		msgs, err := q.Receive(context.Background(), 1, time.Minute, 5*time.Second)
		if err == nil && len(msgs) != 0 {
			err = fmt.Errorf("got %d messages from an empty queue", len(msgs))
		}
		done <- err
	}()
	clock.BlockUntil(1)
	clock.Advance(4 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("long poll returned before its wait: %v", err)
	default:
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLongPollWakesWhenDelayEnds(t *testing.T) {
	clock := clock.NewFake(epoch)
	q := mustQueue(t, newBroker(t, clock), "q", Config{})
	ctx := context.Background()
	id, err := q.Send(ctx, []byte("delayed"), queue.SendOptions{Delay: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []queue.Message, 1)
	go func() {
		msgs, _ := q.Receive(ctx, 1, time.Minute, 20*time.Second)
		done <- msgs
	}()
	// The waiter's timer is set for the delay's end, not the whole wait.
	clock.BlockUntil(1)
	clock.Advance(3 * time.Second)
	if msgs := <-done; len(msgs) != 1 || msgs[0].ID != id {
		t.Fatalf("got %v, want the delayed message", msgs)
	}
}

func TestDelayedSendRearmsWaiters(t *testing.T) {
	clock := clock.NewFake(epoch)
	q := mustQueue(t, newBroker(t, clock), "q", Config{})
	ctx := context.Background()
	done := make(chan []queue.Message, 1)
	go func() {
		msgs, _ := q.Receive(ctx, 1, time.Minute, 20*time.Second)
		done <- msgs
	}()
	clock.BlockUntil(1) // waiting on its 20 s timer
	id, err := q.Send(ctx, []byte("soon"), queue.SendOptions{Delay: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	select {
	case msgs := <-done:
		if len(msgs) != 1 || msgs[0].ID != id {
			t.Fatalf("got %v, want the delayed message", msgs)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait the test needs
		t.Fatal("waiter kept its 20 s timer and missed the delayed message's due time")
	}
}

func TestReceiveEndsOnCancelAndClose(t *testing.T) {
	clock := clock.NewFake(epoch)
	b := newBroker(t, clock)
	q := mustQueue(t, b, "q", Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { _, err := q.Receive(ctx, 1, time.Minute, 20*time.Second); done <- err }()
	go func() { _, err := q.Receive(context.Background(), 1, time.Minute, 20*time.Second); done <- err }()
	clock.BlockUntil(2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	b.Close()
	if err := <-done; !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("receive across Close: %v", err)
	}
	if _, err := q.Send(context.Background(), []byte("x"), queue.SendOptions{}); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
}

func TestMoveMessagesBackFromDLQ(t *testing.T) {
	clock := clock.NewFake(epoch)
	b := newBroker(t, clock)
	q := mustQueue(t, b, "q", Config{DeadLetter: "dlq", MaxReceiveCount: 1})
	dlq := mustQueue(t, b, "dlq", Config{})
	ctx := context.Background()
	ids := map[string]bool{}
	for i := range 3 {
		id, err := q.Send(ctx, []byte(fmt.Sprint("m", i)), queue.SendOptions{Attributes: map[string]string{"i": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if msgs, _ := q.Receive(ctx, 10, time.Second, 0); len(msgs) != 3 {
		t.Fatalf("first receive got %d", len(msgs))
	}
	clock.Advance(time.Second)
	if msgs, _ := q.Receive(ctx, 10, time.Second, 0); len(msgs) != 0 {
		t.Fatalf("receive past maxReceiveCount got %d, want all moved", len(msgs))
	}
	if s, _ := dlq.Stats(); s != (Stats{Visible: 3}) {
		t.Fatalf("dlq stats %+v", s)
	}
	cases := []struct {
		name      string
		max, want int
	}{{"one", 1, 1}, {"rest", 0, 2}, {"none left", 0, 0}}
	for _, tc := range cases {
		n, err := dlq.MoveMessages(ctx, q, tc.max)
		if err != nil || n != tc.want {
			t.Fatalf("%s: moved %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}
	msgs, _ := q.Receive(ctx, 10, time.Second, 0)
	if len(msgs) != 3 {
		t.Fatalf("after move back got %d messages", len(msgs))
	}
	for _, m := range msgs {
		if !ids[m.ID] || m.ReceiveCount != 1 || m.Attributes["i"] == "" {
			t.Fatalf("moved back message %+v: want its id and attributes, receive count 1", m)
		}
	}
	if _, err := dlq.MoveMessages(ctx, dlq, 0); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("move onto itself: %v", err)
	}
}

func TestReceiptOfAnotherQueueIsInvalid(t *testing.T) {
	b := newBroker(t, clock.NewFake(epoch))
	a, c := mustQueue(t, b, "a", Config{}), mustQueue(t, b, "c", Config{})
	ctx := context.Background()
	a.Send(ctx, []byte("x"), queue.SendOptions{})
	c.Send(ctx, []byte("y"), queue.SendOptions{})
	m, _ := a.Receive(ctx, 1, time.Minute, 0)
	if err := c.Delete(ctx, m[0].ReceiptHandle); !errors.Is(err, queue.ErrReceiptInvalid) {
		t.Fatalf("delete with another queue's receipt: %v", err)
	}
	if s, _ := c.Stats(); s.Visible != 1 {
		t.Fatalf("other queue lost its message: %+v", s)
	}
}

func TestInvalidConfig(t *testing.T) {
	b := newBroker(t, clock.NewFake(epoch))
	for name, cfg := range map[string]Config{
		"zero max":     {DeadLetter: "d", MaxReceiveCount: 0},
		"max too high": {DeadLetter: "d", MaxReceiveCount: 1001},
		"self":         {DeadLetter: "q", MaxReceiveCount: 3},
	} {
		if _, err := b.Queue("q", cfg); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestConsumerRunStopsOnCancel(t *testing.T) {
	clock := clock.NewFake(epoch)
	q := mustQueue(t, newBroker(t, clock), "q", Config{})
	ctx, cancel := context.WithCancel(context.Background())
	const n = 25
	for i := range n {
		q.Send(ctx, []byte(fmt.Sprint(i)), queue.SendOptions{})
	}
	handled := make(chan string, n)
	c := &queue.Consumer{
		Queue: q, Concurrency: 3, BatchSize: 4,
		Handler: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			for _, r := range ev.Records {
				handled <- r.Body
			}
			return events.SQSEventResponse{}, nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	seen := map[string]bool{}
	for range n {
		seen[<-handled] = true
	}
	if len(seen) != n {
		t.Fatalf("handled %d distinct messages, want %d", len(seen), n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if s, _ := q.Stats(); s != (Stats{}) {
		t.Fatalf("queue not empty after every message succeeded: %+v", s)
	}
}

// TestSurvivesKill sends messages from a child process, kills it with SIGKILL once they are
// acknowledged, and reads them back: an acknowledged Send is on disk.
func TestSurvivesKill(t *testing.T) {
	if path := os.Getenv("LOCALQUEUE_CHILD_DB"); path != "" {
		childSend(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "queue.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSurvivesKill$")
	cmd.Env = append(os.Environ(), "LOCALQUEUE_CHILD_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	for !strings.Contains(string(buf), "\n") {
		b := make([]byte, 64)
		n, err := out.Read(b)
		if err != nil {
			t.Fatalf("child: %v (%q)", err, buf)
		}
		buf = append(buf, b[:n]...)
	}
	cmd.Process.Kill() // SIGKILL: no deferred Close runs
	cmd.Wait()
	acked, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(buf), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("child said %q", buf)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := New(db, Options{Clock: clock.NewFake(epoch)})
	defer b.Close()
	q := mustQueue(t, b, "q", Config{})
	s, err := q.Stats()
	if err != nil || s.Visible < acked {
		t.Fatalf("after kill: %+v, %v; want at least the %d acknowledged messages", s, err, acked)
	}
}

// childSend acknowledges 100 sends on stdout, then keeps sending until it is killed.
func childSend(path string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		panic(err)
	}
	b := New(db, Options{Clock: clock.NewFake(epoch)})
	q, err := b.Queue("q", Config{})
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		if _, err := q.Send(context.Background(), []byte(fmt.Sprint(i)), queue.SendOptions{}); err != nil {
			panic(err)
		}
		if i == 99 {
			fmt.Println(100)
		}
	}
}
