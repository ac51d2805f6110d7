package sqsbatch_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/sqsbatch"
)

// FuzzHandler feeds records as Lambda might send them (any body, any system attribute text):
// the adapter never panics, hands the func the record as it came, and reports only ids of the batch.
func FuzzHandler(f *testing.F) {
	f.Add("m1", `{"id":"evt_1"}`, "1", "1764590400000", "n", "v")
	f.Add("", "", "", "", "", "")
	f.Add("m2", "fail", "-3", "x", "dead_letter_id", "dl_")
	f.Add("m3", "panic", "99999999999999999999", "-1", "k", "")
	f.Fuzz(func(t *testing.T, id, body, receives, sent, attr, value string) {
		rec := events.SQSMessage{MessageId: id, Body: body, EventSourceARN: arn,
			Attributes:        map[string]string{"ApproximateReceiveCount": receives, "SentTimestamp": sent},
			MessageAttributes: map[string]events.SQSMessageAttribute{attr: {StringValue: &value, DataType: "String"}}}
		var got queue.Message
		h := (&sqsbatch.Batch{Log: slog.New(slog.DiscardHandler), Each: func(_ context.Context, m queue.Message) error {
			got = m
			switch {
			case strings.HasPrefix(string(m.Body), "panic"):
				panic("bad message")
			case strings.HasPrefix(string(m.Body), "fail"):
				return errors.New("no")
			}
			return nil
		}}).Handle
		resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec, rec}})
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range resp.BatchItemFailures {
			if fl.ItemIdentifier != id {
				t.Fatalf("failure %q is not in the batch", fl.ItemIdentifier)
			}
		}
		if got.ID != id || string(got.Body) != body || got.Attributes[attr] != value || got.Source != arn {
			t.Fatalf("message %+v from %+v", got, rec)
		}
	})
}
