package outboxlambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// flaky fails its first n deliveries, then records each one.
type flaky struct {
	mu        sync.Mutex
	fail      int
	delivered []string
}

func (f *flaky) handle(_ context.Context, m outbox.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("throttled")
	}
	f.delivered = append(f.delivered, m.ID)
	return nil
}

// streamTable creates an outbox table with a NEW_IMAGE stream on DynamoDB Local and returns the
// store over it (plus a payments table) and the stream's ARN.
func streamTable(t *testing.T) (store.Store, string) {
	t.Helper()
	db := testenv.DynamoDB(t)
	name := testenv.CreateTable(t, db, testenv.Schema{GSI1: true})
	ctx := context.Background()
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name),
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage}}); err != nil {
		t.Fatalf("enable the stream: %v", err)
	}
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil || d.Table.LatestStreamArn == nil {
		t.Fatalf("describe: %v", err)
	}
	s := dynamo.New(db, map[string]string{outbox.Table: name, "payments": testenv.CreateTable(t, db, testenv.Schema{})})
	return s, *d.Table.LatestStreamArn
}

// readStream reads every record of the stream so far, from the start of each shard, as Lambda's
// event source mapping would hand them to the function.
func readStream(t *testing.T, arn string, want int) events.DynamoDBEvent {
	t.Helper()
	ctx := context.Background()
	c := dynamodbstreams.NewFromConfig(testenv.DynamoDBConfig(t))
	var ev events.DynamoDBEvent
	deadline := time.Now().Add(20 * time.Second)
	for len(ev.Records) < want {
		if time.Now().After(deadline) {
			t.Fatalf("stream gave %d records, want %d", len(ev.Records), want)
		}
		ev.Records = nil
		d, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range d.StreamDescription.Shards {
			it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
				ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range out.Records {
					ev.Records = append(ev.Records, lambdaRecord(r))
				}
				if len(out.Records) == 0 {
					break
				}
				iter = out.NextShardIterator
			}
		}
	}
	return ev
}

func lambdaRecord(r streamtypes.Record) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{}
	for k, v := range r.Dynamodb.NewImage {
		switch v := v.(type) {
		case *streamtypes.AttributeValueMemberS:
			img[k] = events.NewStringAttribute(v.Value)
		case *streamtypes.AttributeValueMemberN:
			img[k] = events.NewNumberAttribute(v.Value)
		case *streamtypes.AttributeValueMemberB:
			img[k] = events.NewBinaryAttribute(v.Value)
		}
	}
	return events.DynamoDBEventRecord{EventName: string(r.EventName), EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber),
			StreamViewType: string(r.Dynamodb.StreamViewType)}}
}

// TestStreamRelayOnDynamoDBLocal: an outbox message committed with its state change in one
// TransactWriteItems appears on the table's stream; a failed delivery is reported by its
// sequence number and the message stays; the next delivery succeeds and deletes it, and the
// relay's own delete (a REMOVE record) is not delivered again.
func TestStreamRelayOnDynamoDBLocal(t *testing.T) {
	s, arn := streamTable(t)
	ctx := context.Background()
	w, err := outbox.New("start", "recovery#pay_s#r1", map[string]string{"payment_id": "pay_s"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, store.Write{Table: "payments", Put: &store.Item{PK: "pay_s", Doc: []byte(`{}`)}}, w); err != nil {
		t.Fatal(err)
	}
	ev := readStream(t, arn, 1)
	if ev.Records[0].EventName != "INSERT" {
		t.Fatalf("first record %s", ev.Records[0].EventName)
	}
	h := &flaky{fail: 1}
	r := &Handler{Relay: &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{"start": h.handle}, Log: slog.New(slog.DiscardHandler)}}
	resp, err := r.Stream(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].Change.SequenceNumber {
		t.Fatalf("failed delivery: %+v, %v", resp, err)
	}
	if _, err := s.Get(ctx, outbox.Table, "recovery#pay_s#r1", ""); err != nil {
		t.Fatalf("undelivered message gone: %v", err)
	}
	// Lambda retries the batch from the failed record.
	resp, err = r.Stream(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(h.delivered) != 1 {
		t.Fatalf("retry: %+v, %v, delivered %v", resp, err, h.delivered)
	}
	if _, err := s.Get(ctx, outbox.Table, "recovery#pay_s#r1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered message not marked done: %v", err)
	}
	all := readStream(t, arn, 2)
	if all.Records[1].EventName != "REMOVE" {
		t.Fatalf("second record %s", all.Records[1].EventName)
	}
	if resp, _ := r.Stream(ctx, events.DynamoDBEvent{Records: all.Records[1:]}); len(resp.BatchItemFailures) != 0 || len(h.delivered) != 1 {
		t.Fatalf("the REMOVE record was delivered: %v", h.delivered)
	}
}

// A record that is not an outbox item fails alone and loudly, never silently skipped.
func TestStreamRejectsForeignImages(t *testing.T) {
	r := &Handler{Relay: &outbox.Relay{}, Log: slog.New(slog.DiscardHandler)}
	resp, _ := r.Stream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "7", NewImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("x")}}},
	}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "7" {
		t.Fatalf("%+v", resp)
	}
}

// FuzzStreamImage: any new image, however malformed, is delivered only when it is an outbox
// item with a known kind, and otherwise reported, never panicking.
func FuzzStreamImage(f *testing.F) {
	f.Add("m1", []byte(`{"id":"m1","kind":"k","payload":null,"created_at":"2026-12-01T00:00:00Z"}`), "1", "outbox#due")
	f.Add("m2", []byte(`{`), "x", "")
	f.Add("", []byte(`{"id":"","kind":""}`), "-1", "outbox#due")
	f.Fuzz(func(t *testing.T, pk string, doc []byte, ver, index string) {
		delivered := 0
		r := &Handler{Relay: &outbox.Relay{Store: nopStore{}, Handlers: map[string]outbox.Handler{"k": func(context.Context, outbox.Message) error { delivered++; return nil }},
			Log: slog.New(slog.DiscardHandler)}}
		img := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "doc": events.NewBinaryAttribute(doc),
			"ver": events.NewNumberAttribute(ver), "gsi1pk": events.NewStringAttribute(index)}
		resp, err := r.Stream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
			{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "1", NewImage: img}}}})
		if err != nil || delivered+len(resp.BatchItemFailures) > 1 {
			t.Fatalf("delivered %d, failures %v, %v", delivered, resp.BatchItemFailures, err)
		}
	})
}

// nopStore accepts every delete.
type nopStore struct{ store.Store }

func (nopStore) Delete(context.Context, string, string, string, store.Cond) error { return nil }

// The relay function's handler: a stream batch is delivered record by record; anything else is
// the schedule's sweep, which takes only messages due longer than MinAge (younger ones are the
// stream's), so a message whose stream records expired is still delivered.
func TestHandleDispatchesStreamAndSweep(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	c := clock.NewFake(t0)
	h := &flaky{}
	r := &Handler{Relay: &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{"k": h.handle}, Now: c.Now, MinAge: 10 * time.Minute,
		Log: slog.New(slog.DiscardHandler)}}
	w, _ := outbox.New("k", "left-behind", nil, t0)
	if err := s.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	out, err := r.Handle(ctx, []byte(`{"version":"0","source":"aws.scheduler"}`))
	if err != nil || out.(Sweep) != (Sweep{}) {
		t.Fatalf("sweep of a young message: %+v, %v", out, err)
	}
	c.Advance(11 * time.Minute)
	out, err = r.Handle(ctx, []byte(`{}`))
	if err != nil || out.(Sweep) != (Sweep{Delivered: 1}) || fmt.Sprint(h.delivered) != "[left-behind]" {
		t.Fatalf("sweep: %+v, %v, %v", out, err, h.delivered)
	}
	stream := `{"Records":[{"eventName":"INSERT","eventSource":"aws:dynamodb","dynamodb":{"SequenceNumber":"9","NewImage":{"pk":{"S":"x"}}}}]}`
	out, err = r.Handle(ctx, []byte(stream))
	if resp, ok := out.(events.DynamoDBEventResponse); err != nil || !ok || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("stream batch: %+v, %v", out, err)
	}
}

// TestStreamLeavesTimersToTheSweepOnDynamoDBLocal: a timer (outbox.NewAt) committed days ahead
// appears on the stream at once; the stream relay neither delivers it early nor reports it nor
// deletes it, and the scheduled sweep delivers it as soon as it is due (not MinAge later).
func TestStreamLeavesTimersToTheSweepOnDynamoDBLocal(t *testing.T) {
	s, arn := streamTable(t)
	ctx := context.Background()
	c := clock.NewFake(t0)
	due := t0.Add(5 * 24 * time.Hour)
	w, err := outbox.NewAt("resume", "resume#inv_1", map[string]string{"payment_id": "pay_1"}, due, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, w); err != nil {
		t.Fatal(err)
	}
	h := &flaky{}
	r := &Handler{Relay: &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{"resume": h.handle}, Now: c.Now,
		MinAge: 10 * time.Minute, Log: slog.New(slog.DiscardHandler)}}
	ev := readStream(t, arn, 1)
	resp, err := r.Stream(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(h.delivered) != 0 {
		t.Fatalf("stream before the moment: %+v, %v, delivered %v", resp, err, h.delivered)
	}
	if _, err := s.Get(ctx, outbox.Table, "resume#inv_1", ""); err != nil {
		t.Fatalf("the stream relay removed a timer: %v", err)
	}
	c.Advance(due.Sub(c.Now()) - time.Second)
	if out, err := r.Handle(ctx, []byte(`{}`)); err != nil || out.(Sweep) != (Sweep{}) {
		t.Fatalf("sweep a second early: %+v, %v", out, err)
	}
	c.Advance(time.Minute) // the sweep's next run
	if out, err := r.Handle(ctx, []byte(`{}`)); err != nil || out.(Sweep) != (Sweep{Delivered: 1}) || fmt.Sprint(h.delivered) != "[resume#inv_1]" {
		t.Fatalf("sweep once due: %+v, %v, %v", out, err, h.delivered)
	}
	if _, err := s.Get(ctx, outbox.Table, "resume#inv_1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered timer not marked done: %v", err)
	}
}
