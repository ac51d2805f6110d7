package sqsbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

const arn = "arn:aws:sqs:us-east-1:000000000000:webhooks"

func batch(source string, bodies ...string) events.SQSEvent {
	msgs := make([]queue.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = queue.Message{ID: fmt.Sprint("m", i), Body: []byte(b), ReceiveCount: 1}
	}
	return queue.Event(source, "us-east-1", msgs)
}

// behave fails, panics or fails the batch by body.
func behave(_ context.Context, m queue.Message) error {
	switch string(m.Body) {
	case "fail":
		return errors.New("cannot apply")
	case "panic":
		var p *struct{ n int }
		_ = p.n // a nil dereference, as a bug would make
	case "down":
		return sqsbatch.FailBatch(errors.New("store unavailable"))
	}
	return nil
}

func TestHandler(t *testing.T) {
	tests := map[string]struct {
		ev        events.SQSEvent
		wantRun   []string // message ids the func saw, in order
		wantFail  []string
		wantErr   bool
		wantLines []string // substrings the log must hold
	}{
		"empty batch": {ev: events.SQSEvent{}, wantRun: nil, wantFail: nil},
		"all succeed": {ev: batch(arn, "ok", "ok", "ok"), wantRun: []string{"m0", "m1", "m2"}},
		"one failure among many": {ev: batch(arn, "ok", "fail", "ok", "ok"), wantRun: []string{"m0", "m1", "m2", "m3"},
			wantFail: []string{"m1"}, wantLines: []string{`"msg":"sqs message failed; it will be delivered again"`, `"message_id":"m1"`,
				`"queue":"webhooks"`, `"receive_count":"1"`, `"error":"cannot apply"`}},
		"every message fails alone": {ev: batch(arn, "fail", "fail"), wantRun: []string{"m0", "m1"}, wantFail: []string{"m0", "m1"}},
		"a panic fails that message alone": {ev: batch(arn, "ok", "panic", "ok"), wantRun: []string{"m0", "m1", "m2"},
			wantFail: []string{"m1"}, wantLines: []string{`"msg":"sqs message handler panicked"`, `nil pointer dereference`, `"stack":"goroutine`}},
		"whole-batch error stops the batch": {ev: batch(arn, "ok", "down", "ok"), wantRun: []string{"m0", "m1"}, wantErr: true,
			wantLines: []string{`"msg":"sqs batch failed; every message will be delivered again"`, `"error":"store unavailable"`}},
		"fifo: the messages after a failure wait their turn": {ev: batch(arn+".fifo", "ok", "fail", "ok", "ok"),
			wantRun: []string{"m0", "m1"}, wantFail: []string{"m1", "m2", "m3"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			var ran []string
			batches := 0
			h := (&sqsbatch.Batch{Log: slog.New(slog.NewJSONHandler(&logs, nil)), AfterBatch: func(context.Context) { batches++ }, Each: func(ctx context.Context, m queue.Message) error {
				ran = append(ran, m.ID)
				return behave(ctx, m)
			}}).Handle
			resp, err := h(context.Background(), tc.ev)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "store unavailable") || len(resp.BatchItemFailures) != 0) {
				t.Fatalf("batch error %v with %+v", err, resp)
			}
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			if !slices.Equal(ran, tc.wantRun) || !slices.Equal(failed, tc.wantFail) {
				t.Fatalf("ran %v failed %v, want ran %v failed %v", ran, failed, tc.wantRun, tc.wantFail)
			}
			if batches != 1 {
				t.Fatalf("after-batch ran %d times", batches)
			}
			for _, want := range tc.wantLines {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %s:\n%s", want, logs.String())
				}
			}
			if len(tc.wantFail) == 0 && !tc.wantErr && logs.Len() != 0 {
				t.Errorf("logged without a failure:\n%s", logs.String())
			}
		})
	}
}

// The plain message carries what the consumers read: id, body, string attributes, receive
// count, sent time, source, the receipt.
func TestMessageFromRecord(t *testing.T) {
	sent := time.UnixMilli(1764590400123).UTC()
	ev := queue.Event(arn, "us-east-1", []queue.Message{{ID: "m-1", Body: []byte(`{"a":1}`), ReceiptHandle: "r-1",
		ReceiveCount: 3, SentAt: sent, Attributes: map[string]string{"dead_letter_id": "dl_1", "retry_id": "rt_1"}}})
	bin := "Binary"
	ev.Records[0].MessageAttributes["blob"] = events.SQSMessageAttribute{BinaryValue: []byte{1}, DataType: bin}
	got := sqsbatch.Message(ev.Records[0])
	want := queue.Message{ID: "m-1", Body: []byte(`{"a":1}`), ReceiptHandle: "r-1", ReceiveCount: 3, SentAt: sent, Source: arn,
		Attributes: map[string]string{"dead_letter_id": "dl_1", "retry_id": "rt_1"}}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// A record without the system attributes (a hand-written test event) reads as zero values.
	bare := sqsbatch.Message(events.SQSMessage{MessageId: "m-2", Body: "x"})
	if bare.ReceiveCount != 0 || !bare.SentAt.IsZero() || bare.Attributes != nil || bare.Source != "" {
		t.Fatalf("%+v", bare)
	}
}

// FailBatch keeps its cause for errors.Is, and tells middleware it fails the batch.
func TestFailBatch(t *testing.T) {
	cause := errors.New("down")
	err := fmt.Errorf("resolve: %w", sqsbatch.FailBatch(cause))
	var fb interface{ FailsBatch() bool }
	if !errors.Is(err, cause) || !errors.As(err, &fb) || !fb.FailsBatch() {
		t.Fatalf("%v", err)
	}
	if sqsbatch.FailBatch(nil) != nil {
		t.Fatal("FailBatch(nil) is an error")
	}
}

// reporter records what the batch asks and tells it; it ends messages whose body is "ended",
// fails Ended for "unreadable", and fails Report for "unrecorded". Report absorbs the func's
// error otherwise, as deadletter.Retries does for a retried message.
type reporter struct{ calls []string }

func (r *reporter) Ended(_ context.Context, m queue.Message) (bool, error) {
	r.calls = append(r.calls, "ended? "+m.ID)
	switch string(m.Body) {
	case "ended":
		return true, nil
	case "unreadable":
		return false, errors.New("ledger unreadable")
	}
	return false, nil
}

func (r *reporter) Report(_ context.Context, m queue.Message, err error) error {
	r.calls = append(r.calls, fmt.Sprintf("report %s: %v", m.ID, err))
	if string(m.Body) == "unrecorded" {
		return errors.New("record not updated")
	}
	return nil
}

// A Reporter is asked before each message's func and told its result after, beside the func:
// an ended message does not run, the func's error is the Reporter's to keep or pass on, and a
// panic or a batch failure is never reported.
func TestReporterIsAskedBeforeAndToldAfter(t *testing.T) {
	tests := map[string]struct {
		body      string
		wantRun   bool
		wantCalls []string
		wantFail  bool
		wantErr   bool
	}{
		"success":              {body: "ok", wantRun: true, wantCalls: []string{"ended? m0", "report m0: <nil>"}},
		"already ended":        {body: "ended", wantCalls: []string{"ended? m0"}},
		"ended unknown":        {body: "unreadable", wantCalls: []string{"ended? m0"}, wantFail: true},
		"failure kept":         {body: "fail", wantRun: true, wantCalls: []string{"ended? m0", "report m0: cannot apply"}},
		"report not recorded":  {body: "unrecorded", wantRun: true, wantCalls: []string{"ended? m0", "report m0: <nil>"}, wantFail: true},
		"panic is not told":    {body: "panic", wantRun: true, wantCalls: []string{"ended? m0"}, wantFail: true},
		"batch failure passes": {body: "down", wantRun: true, wantCalls: []string{"ended? m0"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep := &reporter{}
			ran := false
			each := func(ctx context.Context, m queue.Message) error {
				ran = true
				return behave(ctx, m)
			}
			b := &sqsbatch.Batch{Each: each, Report: rep, Log: slog.New(slog.DiscardHandler)}
			resp, err := b.Handle(context.Background(), batch(arn, tc.body))
			if ran != tc.wantRun || !slices.Equal(rep.calls, tc.wantCalls) || (len(resp.BatchItemFailures) > 0) != tc.wantFail || (err != nil) != tc.wantErr {
				t.Fatalf("ran %v, calls %q, failures %v, error %v", ran, rep.calls, resp.BatchItemFailures, err)
			}
		})
	}
}

// TestDeadlineNearHandsTheRestBack: a slow message (throttled calls retried) brings the
// deadline within the reserve; the messages after it are handed back without running, and the
// handler answers before the deadline with them as failures, the finished ones not among them.
func TestDeadlineNearHandsTheRestBack(t *testing.T) {
	start := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(30*time.Second))
	defer cancel()
	var ran []string
	b := &sqsbatch.Batch{Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }, Reserve: 5 * time.Second,
		Each: func(_ context.Context, m queue.Message) error {
			ran = append(ran, m.ID)
			now = now.Add(12 * time.Second) // each message's calls were throttled and retried
			return nil
		}}
	resp, err := b.Handle(ctx, batch(arn, "ok", "ok", "ok", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	// 30 s: m0 ends at 12 s (18 left), m1 at 24 s (6 left), then 6 s > 5 s lets m2 run to 36 s.
	if !slices.Equal(ran, []string{"m0", "m1", "m2"}) || !slices.Equal(failed, []string{"m3"}) {
		t.Fatalf("ran %v, handed back %v; want m0-m2 run and m3 handed back", ran, failed)
	}
}

// visibility records the batch's visibility changes; it fails for the receipt "r-broken".
type visibility struct{ changes []string }

func (v *visibility) ChangeVisibility(_ context.Context, receipt string, d time.Duration) error {
	v.changes = append(v.changes, fmt.Sprintf("%s %s", receipt, d))
	if receipt == "r-broken" {
		return errors.New("AWS.SimpleQueueService.ReceiptHandleIsInvalid")
	}
	return nil
}

// A message that fails with RetryAfter is reported failed and, with Visibility set, comes back
// after that wait: at least MinRetryAfter, and left to the queue's timeout when the wait reaches
// it. A failed change is logged; the message is reported failed all the same.
func TestRetryAfterChangesVisibility(t *testing.T) {
	busy := errors.New("key in progress")
	tests := map[string]struct {
		err         error
		receipt     string
		noQueue     bool
		timeout     time.Duration
		wantChanges []string
		wantLine    string
	}{
		"plain failure waits for the timeout": {err: busy, wantChanges: nil},
		"retry after a lock's expiry":         {err: sqsbatch.RetryAfter(busy, 3*time.Second), wantChanges: []string{"r-1 3s"}},
		"wrapped further":                     {err: fmt.Errorf("resolve: %w", sqsbatch.RetryAfter(busy, 2500*time.Millisecond)), wantChanges: []string{"r-1 2.5s"}},
		"never straight back":                 {err: sqsbatch.RetryAfter(busy, 0), wantChanges: []string{"r-1 1s"}},
		"past the timeout changes nothing":    {err: sqsbatch.RetryAfter(busy, 40*time.Second), timeout: 30 * time.Second},
		"below the timeout":                   {err: sqsbatch.RetryAfter(busy, 29*time.Second), timeout: 30 * time.Second, wantChanges: []string{"r-1 29s"}},
		"no queue to change":                  {err: sqsbatch.RetryAfter(busy, 3*time.Second), noQueue: true},
		"change fails": {err: sqsbatch.RetryAfter(busy, 3*time.Second), receipt: "r-broken", wantChanges: []string{"r-broken 3s"},
			wantLine: `"msg":"sqs message visibility not changed; it comes back after the queue's timeout"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			receipt := tc.receipt
			if receipt == "" {
				receipt = "r-1"
			}
			ev := queue.Event(arn, "us-east-1", []queue.Message{{ID: "m0", Body: []byte("x"), ReceiptHandle: receipt, ReceiveCount: 1},
				{ID: "m1", Body: []byte("ok"), ReceiptHandle: "r-ok", ReceiveCount: 1}})
			vis := &visibility{}
			var logs bytes.Buffer
			b := &sqsbatch.Batch{Log: slog.New(slog.NewJSONHandler(&logs, nil)), VisibilityTimeout: tc.timeout,
				Each: func(_ context.Context, m queue.Message) error {
					if m.ID == "m0" {
						return tc.err
					}
					return nil
				}}
			if !tc.noQueue {
				b.Visibility = vis
			}
			resp, err := b.Handle(context.Background(), ev)
			if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m0" {
				t.Fatalf("failures %+v, error %v", resp.BatchItemFailures, err)
			}
			if !slices.Equal(vis.changes, tc.wantChanges) {
				t.Fatalf("visibility changes %q, want %q", vis.changes, tc.wantChanges)
			}
			if tc.wantLine != "" && !strings.Contains(logs.String(), tc.wantLine) {
				t.Fatalf("log lacks %s:\n%s", tc.wantLine, logs.String())
			}
		})
	}
	if sqsbatch.RetryAfter(nil, time.Second) != nil {
		t.Fatal("RetryAfter(nil) is an error")
	}
}
