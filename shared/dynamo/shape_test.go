package dynamo

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// recorder wraps a Client and keeps the last input of each operation, so tests can check the
// requests the store sends while DynamoDB Local answers them.
type recorder struct {
	Client
	get   *dynamodb.GetItemInput
	put   *dynamodb.PutItemInput
	del   *dynamodb.DeleteItemInput
	tx    *dynamodb.TransactWriteItemsInput
	query *dynamodb.QueryInput
}

var _ Client = (*recorder)(nil)

func (r *recorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.get = in
	return r.Client.GetItem(ctx, in, o...)
}

func (r *recorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.put = in
	return r.Client.PutItem(ctx, in, o...)
}

func (r *recorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.del = in
	return r.Client.DeleteItem(ctx, in, o...)
}

func (r *recorder) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	r.tx = in
	return r.Client.TransactWriteItems(ctx, in, o...)
}

func (r *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.query = in
	return r.Client.Query(ctx, in, o...)
}

// TestRequestShape checks what the contract suite cannot see: consistency of reads, ALL_OLD on
// every conditional write and only there, and the physical table names.
func TestRequestShape(t *testing.T) {
	client := NewClient(testEndpoint(t))
	tables := newTables(t, client, storetest.Simple, storetest.Sorted)
	r := &recorder{Client: client}
	s := New(r, tables)
	ctx := context.Background()
	allOld := types.ReturnValuesOnConditionCheckFailureAllOld

	if err := s.Put(ctx, storetest.Simple, store.Item{PK: "a"}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	if r.put.ConditionExpression != nil || r.put.ReturnValuesOnConditionCheckFailure != "" || aws.ToString(r.put.TableName) != tables[storetest.Simple] {
		t.Errorf("unconditional put: %+v", r.put)
	}
	_ = s.Put(ctx, storetest.Simple, store.Item{PK: "a"}, store.Cond{Kind: store.NotExists})
	if r.put.ReturnValuesOnConditionCheckFailure != allOld {
		t.Errorf("conditional put without ALL_OLD: %+v", r.put)
	}
	_ = s.Delete(ctx, storetest.Simple, "a", "", store.Cond{Kind: store.VersionIs, Version: 7})
	if r.del.ReturnValuesOnConditionCheckFailure != allOld {
		t.Errorf("conditional delete without ALL_OLD: %+v", r.del)
	}
	_ = s.Transact(ctx,
		store.Write{Table: storetest.Simple, Put: &store.Item{PK: "b"}},
		store.Write{Table: storetest.Sorted, Put: &store.Item{PK: "b", SK: "1"}, Cond: store.Cond{Kind: store.NotExists}},
		store.Write{Table: storetest.Simple, Delete: &store.Key{PK: "c"}, Cond: store.Cond{Kind: store.Exists}},
	)
	if ti := r.tx.TransactItems; len(ti) != 3 || ti[0].Put.ReturnValuesOnConditionCheckFailure != "" ||
		ti[1].Put.ReturnValuesOnConditionCheckFailure != allOld || ti[2].Delete.ReturnValuesOnConditionCheckFailure != allOld ||
		aws.ToString(ti[1].Put.TableName) != tables[storetest.Sorted] {
		t.Errorf("transaction items %+v", ti)
	}
	_, _ = s.Get(ctx, storetest.Simple, "a", "")
	if !aws.ToBool(r.get.ConsistentRead) {
		t.Error("Get is not strongly consistent")
	}
	for _, index := range []bool{false, true} {
		if _, err := s.Query(ctx, store.Query{Table: storetest.Sorted, PK: "b", Index: index, Limit: 7}); err != nil {
			t.Fatal(err)
		}
		// GSIs refuse ConsistentRead; the base table must use it.
		if aws.ToBool(r.query.ConsistentRead) == index || (aws.ToString(r.query.IndexName) == IndexName) != index {
			t.Errorf("index=%v: query %+v", index, r.query)
		}
		if aws.ToInt32(r.query.Limit) != 8 {
			t.Errorf("query asks for %d items, want the page plus one", aws.ToInt32(r.query.Limit))
		}
	}
}
