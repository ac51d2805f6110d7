package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// fakeReceiver hands out one fixed batch and records deletes.
type fakeReceiver struct {
	batch   []Message
	deleted []string
	failDel map[string]bool
}

func (f *fakeReceiver) Receive(context.Context, int, time.Duration, time.Duration) ([]Message, error) {
	b := f.batch
	f.batch = nil
	return b, nil
}

func (f *fakeReceiver) Delete(_ context.Context, receipt string) error {
	if f.failDel[receipt] {
		return ErrReceiptInvalid
	}
	f.deleted = append(f.deleted, receipt)
	return nil
}

// batchReceiver adds DeleteBatch, to check the Consumer prefers it.
type batchReceiver struct {
	fakeReceiver
	batches int
}

func (b *batchReceiver) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	b.batches++
	errs := make([]error, len(receipts))
	for i, r := range receipts {
		errs[i] = b.Delete(ctx, r)
	}
	return errs, nil
}

func batchOf(ids ...string) []Message {
	msgs := make([]Message, len(ids))
	for i, id := range ids {
		msgs[i] = Message{ID: id, Body: []byte("body-" + id), ReceiptHandle: "r-" + id, ReceiveCount: 1, SentAt: time.UnixMilli(1700000000000)}
	}
	return msgs
}

func failing(ids ...string) Handler {
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, id := range ids {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	}
}

func TestConsumerPoll(t *testing.T) {
	cases := map[string]struct {
		handler     Handler
		failDelete  map[string]bool
		wantDeleted []string
		want        BatchResult
	}{
		"all succeed": {handler: failing(), wantDeleted: []string{"r-a", "r-b", "r-c"}, want: BatchResult{3, 3, 0}},
		"one fails":   {handler: failing("b"), wantDeleted: []string{"r-a", "r-c"}, want: BatchResult{3, 2, 1}},
		"handler error fails the batch": {
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, errors.New("boom")
			},
			want: BatchResult{3, 0, 3},
		},
		"panic fails the batch": {
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { panic("bad input") },
			want:    BatchResult{3, 0, 3},
		},
		"unknown identifier fails the batch": {handler: failing("nope"), want: BatchResult{3, 0, 3}},
		"empty identifier fails the batch":   {handler: failing(""), want: BatchResult{3, 0, 3}},
		"failed delete counts as failed": {
			handler: failing(), failDelete: map[string]bool{"r-b": true},
			wantDeleted: []string{"r-a", "r-c"}, want: BatchResult{3, 2, 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, batched := range []bool{false, true} {
				br := &batchReceiver{fakeReceiver: fakeReceiver{batch: batchOf("a", "b", "c"), failDel: tc.failDelete}}
				var r Receiver = &br.fakeReceiver
				if batched {
					r = br
				}
				c := &Consumer{Queue: r, Handler: tc.handler}
				got, err := c.Poll(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want || !slices.Equal(br.deleted, tc.wantDeleted) {
					t.Fatalf("batched=%v: got %+v deleted %v; want %+v deleted %v", batched, got, br.deleted, tc.want, tc.wantDeleted)
				}
				if batched && len(br.deleted) > 1 && br.batches != 1 {
					t.Fatalf("DeleteBatch called %d times for one batch, want 1", br.batches)
				}
			}
		})
	}
}

func TestEventIsWhatLambdaDelivers(t *testing.T) {
	msgs := []Message{{ID: "m1", Body: []byte(`{"a":1}`), ReceiptHandle: "rh", ReceiveCount: 2,
		SentAt: time.UnixMilli(1700000000123), Attributes: map[string]string{"provider": "stripe"}}}
	ev := Event("arn:aws:sqs:us-east-1:123456789012:webhooks", "us-east-1", msgs)
	r := ev.Records[0]
	checks := map[string][2]string{
		"messageId":               {r.MessageId, "m1"},
		"receiptHandle":           {r.ReceiptHandle, "rh"},
		"body":                    {r.Body, `{"a":1}`},
		"md5OfBody":               {r.Md5OfBody, "bb6cb5c68df4652941caf652a366f2d8"},
		"ApproximateReceiveCount": {r.Attributes["ApproximateReceiveCount"], "2"},
		"SentTimestamp":           {r.Attributes["SentTimestamp"], "1700000000123"},
		"eventSource":             {r.EventSource, "aws:sqs"},
		"eventSourceARN":          {r.EventSourceARN, "arn:aws:sqs:us-east-1:123456789012:webhooks"},
		"provider attribute":      {*r.MessageAttributes["provider"].StringValue, "stripe"},
		"attribute type":          {r.MessageAttributes["provider"].DataType, "String"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
}
