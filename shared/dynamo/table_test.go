package dynamo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCreateTable(t *testing.T) {
	client := NewClient(testEndpoint(t))
	ctx := context.Background()
	cases := []struct {
		name           string
		sortKey, index bool
	}{
		{"pk only", false, false},
		{"sorted", true, false},
		{"sorted with index", true, true},
		{"pk only with index", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("twice-test-%d-%d-create", os.Getpid(), tableSeq.Add(1))
			if err := CreateTable(ctx, client, name, tc.sortKey, tc.index); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = DeleteTable(context.Background(), client, name) })
			d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
			if err != nil {
				t.Fatal(err)
			}
			tbl := d.Table
			if tbl.TableStatus != types.TableStatusActive {
				t.Fatalf("status %s", tbl.TableStatus)
			}
			if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
				t.Fatalf("billing %+v", tbl.BillingModeSummary)
			}
			if len(tbl.KeySchema) != map[bool]int{false: 1, true: 2}[tc.sortKey] {
				t.Fatalf("key schema %+v", tbl.KeySchema)
			}
			if tc.index != (len(tbl.GlobalSecondaryIndexes) == 1) {
				t.Fatalf("indexes %+v", tbl.GlobalSecondaryIndexes)
			}
			if tc.index {
				gsi := tbl.GlobalSecondaryIndexes[0]
				if aws.ToString(gsi.IndexName) != IndexName || gsi.Projection.ProjectionType != types.ProjectionTypeAll {
					t.Fatalf("index %+v", gsi)
				}
			}
			ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
			if err != nil {
				t.Fatal(err)
			}
			if d := ttl.TimeToLiveDescription; aws.ToString(d.AttributeName) != attrExpires || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
				t.Fatalf("ttl %+v", d)
			}
		})
	}
	t.Run("exists already", func(t *testing.T) {
		name := fmt.Sprintf("twice-test-%d-%d-create", os.Getpid(), tableSeq.Add(1))
		if err := CreateTable(ctx, client, name, false, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = DeleteTable(context.Background(), client, name) })
		err := CreateTable(ctx, client, name, false, false)
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			t.Fatalf("got %v, want ResourceInUseException", err)
		}
	})
	t.Run("delete twice", func(t *testing.T) {
		name := fmt.Sprintf("twice-test-%d-%d-create", os.Getpid(), tableSeq.Add(1))
		if err := CreateTable(ctx, client, name, false, false); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := DeleteTable(ctx, client, name); err != nil {
				t.Fatalf("delete %d: %v", i, err)
			}
		}
	})
}
