package idempotency_test

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"path/filepath"
	"testing"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/idempotency/idempotencytest"
	"github.com/runtwice/twice/shared/store"
)

// The exported contract suite, against the embedded store and DynamoDB Local in twice's layout
// and in a Powertools idempotency table's (partition key id, TTL expiration).
func TestContractBolt(t *testing.T) {
	idempotencytest.Run(t, func(t testing.TB) store.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestContractDynamoDB(t *testing.T) {
	idempotencytest.Run(t, func(t testing.TB) store.Store {
		client := testenv.DynamoDB(t)
		return dynamo.New(client, map[string]string{
			idempotency.Table:           testenv.CreateTable(t, client, testenv.Schema{}),
			idempotencytest.EffectTable: testenv.CreateTable(t, client, testenv.Schema{}),
		})
	})
}

func TestContractDynamoDBPowertoolsTable(t *testing.T) {
	idempotencytest.Run(t, powertoolsStore)
}

// A record in a Powertools table sits under its key attribute id with the TTL attribute
// expiration in unix seconds, as Powertools' own records do, so the table's TTL expires it.
func TestPowertoolsTableLayout(t *testing.T) {
	s := powertoolsStore(t).(*dynamo.Store)
	clock := idempotencytest.NewClock()
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Now: clock.Now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := idempotency.Do(context.Background(), k, "fn", "k1", idempotency.Fingerprint{Sum: "x"},
		func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(powertoolsTable[t.Name()]),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: idempotency.Scoped("fn", "k1")}}})
	if err != nil || out.Item == nil {
		t.Fatalf("no item under id: %v", err)
	}
	exp, ok := out.Item["expiration"].(*types.AttributeValueMemberN)
	want := clock.Now().Add(7 * 24 * time.Hour).Unix()
	if !ok || exp.Value != strconv.FormatInt(want, 10) {
		t.Fatalf("expiration %v, want %d", out.Item["expiration"], want)
	}
	if _, ok := out.Item["data"].(*types.AttributeValueMemberB); !ok {
		t.Fatalf("no data attribute: %v", out.Item)
	}
}

var powertoolsTable = map[string]string{} // test name -> physical table

func powertoolsStore(t testing.TB) store.Store {
	client := testenv.DynamoDB(t)
	name := testenv.TableName(t)
	if err := dynamo.CreateTableWith(context.Background(), client, name, false, false, dynamo.PowertoolsAttributes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), client, name) })
	powertoolsTable[t.Name()] = name
	return dynamo.New(client, map[string]string{
		idempotency.Table:           name,
		idempotencytest.EffectTable: testenv.CreateTable(t, client, testenv.Schema{}),
	}).WithAttributes(idempotency.Table, dynamo.PowertoolsAttributes)
}
