package rie

import (
	"slices"
	"strings"
	"testing"
)

func TestConsumed(t *testing.T) {
	const put, tx, get, query = "DynamoDB_20120810.PutItem", "DynamoDB_20120810.TransactWriteItems", "DynamoDB_20120810.GetItem", "DynamoDB_20120810.Query"
	const batch = "DynamoDB_20120810.BatchWriteItem"
	big := strings.Repeat("x", 1500)
	cases := []struct {
		name         string
		target       string
		status       int
		answer, sent string
		wru, rru     float64
		table        string
	}{
		{"a write as reported", put, 200, `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":2.0}}`, `{"TableName":"t"}`, 2, 0, "t"},
		{"a read as reported", get, 200, `{"Item":{},"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}`, ``, 0, 0.5, ""},
		{"a query as reported", query, 200, `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.5}}`, ``, 0, 1.5, ""},
		{"a transaction by table", tx, 200, `{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":4.0,"WriteCapacityUnits":4.0},` +
			`{"TableName":"b","CapacityUnits":2.0,"WriteCapacityUnits":2.0}]}`, ``, 6, 0, "a"},
		{"a transaction of small items bills each one", tx, 200, `{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":2.0,"WriteCapacityUnits":2.0}]}`,
			`{"TransactItems":[{"Put":{"TableName":"a","Item":{"pk":{"S":"1"}}}},{"Put":{"TableName":"a","Item":{"pk":{"S":"2"}}}},` +
				`{"Delete":{"TableName":"a","Key":{"pk":{"S":"3"}}}}]}`, 6, 0, "a"},
		{"a transaction's index writes stay as reported", tx, 200,
			`{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":3.0,"WriteCapacityUnits":3.0,"Table":{"CapacityUnits":2.0}}]}`,
			`{"TransactItems":[{"Put":{"TableName":"a","Item":{"pk":{"S":"1"}}}},{"Put":{"TableName":"a","Item":{"pk":{"S":"2"}}}}]}`, 5, 0, "a"},
		{"a batch of small items bills each one once", batch, 200, `{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":1.0}]}`,
			`{"RequestItems":{"a":[{"PutRequest":{"Item":{"pk":{"S":"1"}}}},{"PutRequest":{"Item":{"doc":{"S":"` + big + `"}}}},` +
				`{"DeleteRequest":{"Key":{"pk":{"S":"3"}}}}]}}`, 1 + 2 + 1, 0, "a"},
		{"a batch does not bill what it left unprocessed", batch, 200, `{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":1.0}],` +
			`"UnprocessedItems":{"a":[{"PutRequest":{"Item":{"doc":{"S":"` + big + `"}}}}]}}`,
			`{"RequestItems":{"a":[{"PutRequest":{"Item":{"pk":{"S":"1"}}}},{"PutRequest":{"Item":{"doc":{"S":"` + big + `"}}}}]}}`, 1, 0, "a"},
		{"a failed condition bills the item it found", put, 400,
			`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Item":{"pk":{"S":"k"},"doc":{"S":"` + big + `"}}}`,
			`{"TableName":"t"}`, 2, 0, "t"},
		{"a failed condition on nothing bills one unit", put, 400,
			`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}`, `{"TableName":"t"}`, 1, 0, "t"},
		{"a canceled transaction bills what it would write", tx, 400,
			`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException"}`,
			`{"TransactItems":[{"Put":{"TableName":"t","Item":{"pk":{"S":"k"}}}},{"Put":{"TableName":"u","Item":{"doc":{"S":"` + big + `"}}}}]}`, 2 + 4, 0, "u"},
		{"a throttled request is not billed", put, 400,
			`{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}`, `{"TableName":"t"}`, 0, 0, ""},
		{"not a capacity operation", "DynamoDB_20120810.DescribeTable", 200, `{}`, ``, 0, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wru, rru, tables := consumed(tc.target, tc.status, []byte(tc.answer), []byte(tc.sent))
			if wru != tc.wru || rru != tc.rru {
				t.Fatalf("consumed = %v WRU, %v RRU; want %v, %v", wru, rru, tc.wru, tc.rru)
			}
			if tc.table != "" && tables[tc.table] == 0 {
				t.Fatalf("no write units for table %s: %v", tc.table, tables)
			}
		})
	}
}

func TestWithConsumedCapacity(t *testing.T) {
	if got := string(withConsumedCapacity([]byte(`{"TableName":"t"}`))); got != `{"ReturnConsumedCapacity":"INDEXES","TableName":"t"}` {
		t.Fatalf("added: %s", got)
	}
	if got := string(withConsumedCapacity([]byte(`{"ReturnConsumedCapacity":"TOTAL"}`))); got != `{"ReturnConsumedCapacity":"TOTAL"}` {
		t.Fatalf("kept: %s", got)
	}
	if got := string(withConsumedCapacity([]byte(`not json`))); got != `not json` {
		t.Fatalf("not JSON: %s", got)
	}
}

func TestUsageSub(t *testing.T) {
	var a Usage
	a.add("AWSEvents.PutEvents", []byte(`{"Entries":[{},{}]}`))
	a.add("AmazonSQS.SendMessage", nil)
	a.WriteUnits, a.TableWriteUnits = 3, map[string]float64{"t": 3}
	b := Usage{Requests: map[string]int{"sqs:SendMessage": 1}, WriteUnits: 1, TableWriteUnits: map[string]float64{"t": 1}}
	d := a.Sub(b)
	if d.Events != 2 || d.Requests["events:PutEvents"] != 1 || d.Service("sqs") != 0 || d.WriteUnits != 2 || d.TableWriteUnits["t"] != 2 {
		t.Fatalf("a - b = %+v", d)
	}
}

func TestActionsOf(t *testing.T) {
	cases := []struct {
		name, target, body string
		want               []Call
	}{
		{"one item", "DynamoDB_20120810.PutItem", `{"TableName":"t"}`, []Call{{"dynamodb:PutItem", "t"}}},
		{"an index", "DynamoDB_20120810.Query", `{"TableName":"t","IndexName":"gsi1"}`, []Call{{"dynamodb:Query", "t/index/gsi1"}}},
		{"a transaction: each item's action", "DynamoDB_20120810.TransactWriteItems",
			`{"TransactItems":[{"Put":{"TableName":"a"}},{"Delete":{"TableName":"b"}}]}`,
			[]Call{{"dynamodb:PutItem", "a"}, {"dynamodb:DeleteItem", "b"}}},
		{"a batch: its own action on each table", "DynamoDB_20120810.BatchWriteItem",
			`{"RequestItems":{"b":[{"PutRequest":{}}],"a":[{"PutRequest":{}},{"DeleteRequest":{}}]}}`,
			[]Call{{"dynamodb:BatchWriteItem", "a"}, {"dynamodb:BatchWriteItem", "b"}}},
		{"a queue", "AmazonSQS.SendMessage", `{"QueueUrl":"q"}`, []Call{{"sqs:SendMessage", "q"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ActionsOf(tc.target, []byte(tc.body)); !slices.Equal(got, tc.want) {
				t.Fatalf("ActionsOf = %v, want %v", got, tc.want)
			}
		})
	}
}
