package rie_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/shared/outbox"
)

// relayOutbox hands the outbox messages with the ids to the outbox-relay function as the
// outbox table's stream does (one INSERT record each, the item as shared/dynamo stores it) and
// fails unless every one was delivered and marked done.
func (e *env) relayOutbox(t *testing.T, em *rie.Emulator, ids ...string) {
	t.Helper()
	ctx := t.Context()
	var ev events.DynamoDBEvent
	for i, id := range ids {
		it, err := e.store().Get(ctx, outbox.Table, id, "")
		if err != nil {
			t.Fatalf("outbox message %s: %v", id, err)
		}
		seq := strconv.Itoa(900000 + i)
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventID: seq, EventName: "INSERT", EventSource: "aws:dynamodb",
			EventVersion: "1.1", AWSRegion: rie.Region,
			Change: events.DynamoDBStreamRecord{SequenceNumber: seq, StreamViewType: "NEW_IMAGE",
				Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(it.PK)},
				NewImage: map[string]events.DynamoDBAttributeValue{
					"pk": events.NewStringAttribute(it.PK), "doc": events.NewBinaryAttribute(it.Doc),
					"ver":    events.NewNumberAttribute(strconv.FormatInt(it.Version, 10)),
					"gsi1pk": events.NewStringAttribute(it.IndexPK), "gsi1sk": events.NewStringAttribute(it.IndexSK)}}})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := em.Invoke(ctx, raw)
	var resp events.DynamoDBEventResponse
	if err != nil || json.Unmarshal(b, &resp) != nil || strings.Contains(string(b), "errorType") || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("outbox-relay on %v: %s (%v)\n%s", ids, b, err, em.Output())
	}
	for _, id := range ids {
		if _, err := e.store().Get(ctx, outbox.Table, id, ""); err == nil {
			t.Fatalf("outbox message %s is still there after its delivery", id)
		}
	}
}
