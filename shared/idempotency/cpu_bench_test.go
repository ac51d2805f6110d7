package idempotency

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/store"
)

// replayClient answers every PutItem with the failed condition of a completed record, as
// DynamoDB does for a replay: what is left is the client's own work per replay.
type replayClient struct {
	dynamo.Client
	old map[string]types.AttributeValue
}

func (c *replayClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, &types.ConditionalCheckFailedException{Item: c.old}
}

// BenchmarkReplayClientCPU is the replay path's CPU and allocations on the DynamoDB store with
// the network taken out: go test -run XXX -bench ReplayClientCPU -benchmem ./shared/idempotency
func BenchmarkReplayClientCPU(b *testing.B) {
	body := []byte(`{"amount":1000,"currency":"usd","customer":"cus_bench","payment_method":"pm_card_visa"}`)
	f, err := FingerprintJSON(body)
	if err != nil {
		b.Fatal(err)
	}
	// The stored item, written through the store's own encoding by a completed Keeper.
	mem := &captureClient{}
	st := dynamo.New(mem, map[string]string{Table: "t"})
	k, err := NewKeeper(Keeper{Store: st, Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	out, err := k.Acquire(context.Background(), "bench", "key-1", f)
	if err != nil {
		b.Fatal(err)
	}
	if err := k.Complete(context.Background(), out.Lease, Response{Status: 201, Header: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"id":"pay_00000001","status":"succeeded","amount":1000,"currency":"usd","customer":"cus_bench","provider_payment_id":"pi_000000000000000000000001","decline_code":"","decline_class":"","created_at":"2026-01-01T00:00:00Z"}`)}); err != nil {
		b.Fatal(err)
	}
	rk, err := NewKeeper(Keeper{Store: dynamo.New(&replayClient{old: mem.last}, map[string]string{Table: "t"}), Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := rk.Acquire(context.Background(), "bench", "key-1", f)
		if err != nil || out.Kind != Replay {
			b.Fatal(out.Kind, err)
		}
	}
}

// captureClient keeps the last item put.
type captureClient struct {
	dynamo.Client
	last map[string]types.AttributeValue
}

func (c *captureClient) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.last = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

var _ store.Store = (*dynamo.Store)(nil)
