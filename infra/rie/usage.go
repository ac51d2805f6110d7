package rie

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
)

// Usage is what requests through a Recorder cost, in the units AWS bills.
type Usage struct {
	// Requests counts requests by action ("dynamodb:PutItem", "sqs:SendMessage",
	// "events:PutEvents"): one per HTTP request, whatever it carried.
	Requests map[string]int
	// WriteUnits and ReadUnits are the DynamoDB capacity the requests consumed, as DynamoDB
	// reported it (ReturnConsumedCapacity TOTAL), with a transaction counted at least item by
	// item as AWS bills it (DynamoDB Local sums its items' sizes first). A write DynamoDB
	// refuses reports none, yet is billed: a failed condition bills the size of the item it
	// found (at least 1 unit), a canceled transaction what it would have written.
	WriteUnits, ReadUnits float64
	// TableWriteUnits are WriteUnits by table name.
	TableWriteUnits map[string]float64
	// Events counts EventBridge PutEvents entries: what EventBridge bills (per 64 KB entry).
	Events int
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	out := Usage{Requests: map[string]int{}, WriteUnits: u.WriteUnits + v.WriteUnits, ReadUnits: u.ReadUnits + v.ReadUnits,
		Events: u.Events + v.Events, TableWriteUnits: map[string]float64{}}
	for k, n := range u.TableWriteUnits {
		out.TableWriteUnits[k] += n
	}
	for k, n := range v.TableWriteUnits {
		out.TableWriteUnits[k] += n
	}
	for k, n := range u.Requests {
		out.Requests[k] += n
	}
	for k, n := range v.Requests {
		out.Requests[k] += n
	}
	return out
}

// Sub returns u minus v: what was spent between two readings.
func (u Usage) Sub(v Usage) Usage {
	neg := Usage{Requests: map[string]int{}, WriteUnits: -v.WriteUnits, ReadUnits: -v.ReadUnits, Events: -v.Events,
		TableWriteUnits: map[string]float64{}}
	for k, n := range v.Requests {
		neg.Requests[k] = -n
	}
	for k, n := range v.TableWriteUnits {
		neg.TableWriteUnits[k] = -n
	}
	out := u.Add(neg)
	for k, n := range out.TableWriteUnits {
		if n == 0 {
			delete(out.TableWriteUnits, k)
		}
	}
	for k, n := range out.Requests {
		if n == 0 {
			delete(out.Requests, k)
		}
	}
	return out
}

// Service sums the requests to one service ("sqs", "states", "events", "dynamodb").
func (u Usage) Service(name string) int {
	n := 0
	for k, v := range u.Requests {
		if strings.HasPrefix(k, name+":") {
			n += v
		}
	}
	return n
}

// servicePrefix maps the X-Amz-Target's service to the action prefix IAM uses.
var servicePrefix = map[string]string{"AmazonSQS": "sqs", "AWSStepFunctions": "states", "AmazonSSM": "ssm", "AWSEvents": "events"}

// action is the IAM-style name of a JSON-protocol request: "dynamodb:PutItem".
func action(target string) (string, bool) {
	svc, op, ok := strings.Cut(target, ".")
	if !ok {
		return "", false
	}
	if strings.HasPrefix(svc, "DynamoDB_") {
		return "dynamodb:" + op, true
	}
	if p, ok := servicePrefix[svc]; ok {
		return p + ":" + op, true
	}
	return target, true
}

func (u *Usage) add(target string, body []byte) {
	a, ok := action(target)
	if !ok {
		return
	}
	if u.Requests == nil {
		u.Requests = map[string]int{}
	}
	u.Requests[a]++
	if a == "events:PutEvents" {
		var in struct{ Entries []json.RawMessage }
		_ = json.Unmarshal(body, &in)
		u.Events += len(in.Entries)
	}
}

// sentKey carries a DynamoDB request's body, as sent, to the proxy's reading of the answer.
type sentKey struct{}

// capacityOps are the DynamoDB operations that take ReturnConsumedCapacity.
var capacityOps = map[string]bool{"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true, "Query": true,
	"Scan": true, "BatchGetItem": true, "BatchWriteItem": true, "TransactGetItems": true, "TransactWriteItems": true}

// readOps are the operations whose capacity is read capacity.
var readOps = map[string]bool{"GetItem": true, "Query": true, "Scan": true, "BatchGetItem": true, "TransactGetItems": true}

func opOf(target string) string {
	_, op, _ := strings.Cut(target, ".")
	return op
}

// withConsumedCapacity asks DynamoDB to report what the request consumes, the table's part
// apart from its indexes'. A request that asks already, or is not an object, is left as it is.
func withConsumedCapacity(body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || doc == nil {
		return body
	}
	if _, ok := doc["ReturnConsumedCapacity"]; ok {
		return body
	}
	doc["ReturnConsumedCapacity"] = json.RawMessage(`"INDEXES"`)
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// capacity is one ConsumedCapacity entry.
type capacity struct {
	TableName                                            string
	CapacityUnits, ReadCapacityUnits, WriteCapacityUnits float64
	// Table is the table's own part of CapacityUnits (the rest is its indexes'), when the
	// request asked for INDEXES.
	Table *struct{ CapacityUnits float64 }
}

// consumed is what one DynamoDB request cost: the ConsumedCapacity of its answer, or for a
// write DynamoDB refused, what AWS bills for it.
func consumed(target string, status int, answer, sent []byte) (wru, rru float64, tables map[string]float64) {
	tables = map[string]float64{}
	op := opOf(target)
	if !capacityOps[op] {
		return 0, 0, tables
	}
	if status == 200 {
		var out struct{ ConsumedCapacity json.RawMessage }
		_ = json.Unmarshal(answer, &out)
		var caps []capacity
		if len(out.ConsumedCapacity) > 0 && out.ConsumedCapacity[0] == '[' {
			_ = json.Unmarshal(out.ConsumedCapacity, &caps)
		} else {
			var c capacity
			if json.Unmarshal(out.ConsumedCapacity, &c) == nil {
				caps = append(caps, c)
			}
		}
		for _, c := range caps {
			switch {
			case c.ReadCapacityUnits != 0 || c.WriteCapacityUnits != 0:
				rru += c.ReadCapacityUnits
				wru += c.WriteCapacityUnits
				tables[c.TableName] += c.WriteCapacityUnits
			case readOps[op]:
				rru += c.CapacityUnits
			default:
				wru += c.CapacityUnits
				tables[c.TableName] += c.CapacityUnits
			}
		}
		// DynamoDB Local reports a table's part of a transaction (2 units per started KB) or a
		// batch (1 unit) for all its items together; AWS bills each item by its own size. Count
		// each table's own part at least what its items cost one by one (a delete or condition
		// check at its 1 KB minimum, the size of the item it touches being unknown here, and
		// nothing for what a batch left unprocessed); its indexes' part stays as reported.
		var billed map[string]float64
		switch op {
		case "TransactWriteItems":
			billed = transactUnits(sent)
		case "BatchWriteItem":
			billed = batchUnits(sent, answer)
		}
		if billed != nil {
			own := map[string]float64{}
			for _, c := range caps {
				if c.Table != nil {
					own[c.TableName] = c.Table.CapacityUnits
				} else {
					own[c.TableName] = tables[c.TableName]
				}
			}
			for t, u := range billed {
				if u > own[t] {
					wru += u - own[t]
					tables[t] += u - own[t]
				}
			}
		}
		return wru, rru, tables
	}
	if readOps[op] {
		return 0, 0, tables
	}
	var fail struct {
		Type string `json:"__type"`
		Item map[string]any
	}
	var req struct{ TableName string }
	_ = json.Unmarshal(sent, &req)
	_ = json.Unmarshal(answer, &fail)
	switch {
	case strings.HasSuffix(fail.Type, "ConditionalCheckFailedException"):
		// "DynamoDB still consumes write capacity ... dependent on the size of the existing
		// item (or a minimum of 1)".
		wru = writeUnits(itemSize(fail.Item))
		tables[req.TableName] += wru
		return wru, 0, tables
	case strings.HasSuffix(fail.Type, "TransactionCanceledException"):
		for t, u := range transactUnits(sent) {
			wru += u
			tables[t] += u
		}
		return wru, 0, tables
	}
	return 0, 0, tables // throttled, invalid: not billed
}

// transactUnits is what AWS bills a TransactWriteItems request by table: 2 units per started
// KB of each item it puts, and 2 for each delete, update or condition check (the minimum).
func transactUnits(sent []byte) map[string]float64 {
	var in struct {
		TransactItems []map[string]struct {
			TableName string
			Item      map[string]any
		}
	}
	_ = json.Unmarshal(sent, &in)
	out := map[string]float64{}
	for _, it := range in.TransactItems {
		for _, x := range it {
			out[x.TableName] += 2 * writeUnits(itemSize(x.Item))
		}
	}
	return out
}

// batchUnits is what AWS bills a BatchWriteItem request by table: 1 unit per started KB of
// each item it puts and 1 for each delete, less what the answer left unprocessed.
func batchUnits(sent, answer []byte) map[string]float64 {
	type requests map[string][]struct {
		PutRequest    *struct{ Item map[string]any }
		DeleteRequest *struct{}
	}
	var in struct{ RequestItems requests }
	var out struct{ UnprocessedItems requests }
	_ = json.Unmarshal(sent, &in)
	_ = json.Unmarshal(answer, &out)
	units := map[string]float64{}
	add := func(rs requests, sign float64) {
		for t, reqs := range rs {
			for _, r := range reqs {
				u := 1.0
				if r.PutRequest != nil {
					u = writeUnits(itemSize(r.PutRequest.Item))
				}
				units[t] += sign * u
			}
		}
	}
	add(in.RequestItems, 1)
	add(out.UnprocessedItems, -1)
	return units
}

// writeUnits is one write of an item of n bytes: one unit per started KB, at least one.
func writeUnits(n int) float64 { return math.Max(1, math.Ceil(float64(n)/1024)) }

// itemSize is an item's size by DynamoDB's rules: each attribute's name and value, in bytes.
func itemSize(item map[string]any) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize sizes one attribute value in its wire form ({"S":..}, {"N":..}, ...).
func valueSize(v any) int {
	m, _ := v.(map[string]any)
	for kind, x := range m {
		switch kind {
		case "S":
			s, _ := x.(string)
			return len(s)
		case "N":
			s, _ := x.(string)
			return numberSize(s)
		case "B":
			s, _ := x.(string)
			b, _ := base64.StdEncoding.DecodeString(s)
			return len(b)
		case "BOOL", "NULL":
			return 1
		case "L":
			l, _ := x.([]any)
			n := 3
			for _, e := range l {
				n += 1 + valueSize(e)
			}
			return n
		case "M":
			mm, _ := x.(map[string]any)
			return 3 + itemSize(mm) + len(mm)
		case "SS", "NS", "BS":
			l, _ := x.([]any)
			n := 0
			for _, e := range l {
				s, _ := e.(string)
				switch kind {
				case "SS":
					n += len(s)
				case "NS":
					n += numberSize(s)
				default:
					b, _ := base64.StdEncoding.DecodeString(s)
					n += len(b)
				}
			}
			return n
		}
	}
	return 0
}

// numberSize is about a number's stored size: one byte per two significant digits, plus one.
func numberSize(s string) int {
	digits := strings.Trim(strings.NewReplacer("-", "", ".", "", "+", "").Replace(s), "0")
	return (len(digits)+1)/2 + 1
}
