package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Throttle is an HTTP client for an aws.Config that stands in front of a real server (DynamoDB
// Local, moto) and answers the calls Throttles picks the way the AWS service answers a
// throttled call: its HTTP status, headers and JSON error body, so the SDK's own deserialiser
// and retryer see exactly what AWS sends. Every other call goes to Next.
//
//	th := &testenv.Throttle{Throttles: testenv.FirstN(2)}
//	cfg := testenv.MotoConfig(t)
//	cfg.HTTPClient = th
//
// The services are told apart by X-Amz-Target, which each of them (all JSON protocols) sends:
//
//	DynamoDB_20120810.*  400 ProvisionedThroughputExceededException (odd throttles) or
//	                     ThrottlingException (even), application/x-amz-json-1.0
//	AmazonSQS.*          400 RequestThrottled, x-amzn-query-error: RequestThrottled;Sender
//	AWSStepFunctions.*   400 ThrottlingException, application/x-amz-json-1.0
//	AWSEvents.*          400 ThrottlingException, application/x-amz-json-1.1; with
//	                     PartialPutEvents a throttled PutEvents is a 200 whose every entry failed
//	                     with ThrottlingException (FailedEntryCount), as EventBridge answers
//	DynamoDB BatchWriteItem with PartialBatchWrite: the first request of each table is
//	                     written (sent on to Next) and the rest come back as UnprocessedItems
//	                     in a 200, as DynamoDB answers a batch that exceeds a partition's
//	                     throughput
//	AmazonSSM.*          400 ThrottlingException, application/x-amz-json-1.1
type Throttle struct {
	// Next serves the calls that are not throttled (default the SDK's buildable client).
	Next aws.HTTPClient
	// Throttles says whether call n (1-based, every call through this client) is throttled.
	Throttles func(n int, target string) bool
	// PartialPutEvents answers a throttled PutEvents with per-entry failures instead of a
	// whole-call error.
	PartialPutEvents bool
	// PartialBatchWrite answers a throttled BatchWriteItem by writing part of it and returning
	// the rest unprocessed, instead of a whole-call error.
	PartialBatchWrite bool
	// Now stamps the calls (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	calls    []Call
	throttle int
}

// Call is one request the Throttle saw.
type Call struct {
	Target    string // X-Amz-Target, e.g. "DynamoDB_20120810.PutItem"
	At        time.Time
	Throttled bool
}

// FirstN throttles the first n calls.
func FirstN(n int) func(int, string) bool {
	return func(i int, _ string) bool { return i <= n }
}

// Always throttles every call.
func Always(int, string) bool { return true }

// Calls returns the calls seen so far.
func (t *Throttle) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Call(nil), t.calls...)
}

// Do implements aws.HTTPClient.
func (t *Throttle) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	t.mu.Lock()
	n := len(t.calls) + 1
	throttled := t.Throttles != nil && t.Throttles(n, target)
	t.calls = append(t.calls, Call{Target: target, At: now(), Throttled: throttled})
	if throttled {
		t.throttle++
	}
	odd := t.throttle%2 == 1
	t.mu.Unlock()
	if !throttled {
		next := t.Next
		if next == nil {
			next = awshttp.NewBuildableClient()
		}
		return next.Do(req)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	if t.PartialBatchWrite && target == "DynamoDB_20120810.BatchWriteItem" {
		return t.partialBatchWrite(req, body)
	}
	return throttledResponse(req, target, body, odd, t.PartialPutEvents), nil
}

// partialBatchWrite sends on the first request of each table in a BatchWriteItem and adds the
// others to the answer as UnprocessedItems.
func (t *Throttle) partialBatchWrite(req *http.Request, body []byte) (*http.Response, error) {
	var in map[string]json.RawMessage
	var items map[string][]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(in["RequestItems"], &items); err != nil {
		return nil, err
	}
	sent, left := map[string][]json.RawMessage{}, map[string][]json.RawMessage{}
	for table, reqs := range items {
		sent[table] = reqs[:1]
		if len(reqs) > 1 {
			left[table] = reqs[1:]
		}
	}
	in["RequestItems"], _ = json.Marshal(sent)
	nb, _ := json.Marshal(in)
	fwd := req.Clone(req.Context())
	fwd.Body, fwd.ContentLength = io.NopCloser(bytes.NewReader(nb)), int64(len(nb))
	fwd.Header.Set("Content-Length", strconv.Itoa(len(nb)))
	next := t.Next
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	resp, err := next.Do(fwd)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	ab, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(ab, &out); err != nil {
		return nil, err
	}
	out["UnprocessedItems"], _ = json.Marshal(left)
	ab, _ = json.Marshal(out)
	resp.Header.Del("X-Amz-Crc32") // the answer is changed: its checksum no longer holds
	resp.Header.Set("Content-Length", strconv.Itoa(len(ab)))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(ab)), int64(len(ab))
	return resp, nil
}

func throttledResponse(req *http.Request, target string, reqBody []byte, odd, partial bool) *http.Response {
	service, _, _ := strings.Cut(target, ".")
	h := http.Header{}
	h.Set("X-Amzn-Requestid", "throttled-by-testenv")
	status := http.StatusBadRequest
	var body string
	switch service {
	case "DynamoDB_20120810":
		h.Set("Content-Type", "application/x-amz-json-1.0")
		if odd {
			body = `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",` +
				`"message":"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}`
		} else {
			body = `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Throughput exceeds the current capacity of your table or index."}`
		}
	case "AmazonSQS":
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amzn-Query-Error", "RequestThrottled;Sender")
		body = `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Request is throttled."}`
	case "AWSStepFunctions":
		h.Set("Content-Type", "application/x-amz-json-1.0")
		body = `{"__type":"ThrottlingException","message":"Rate exceeded"}`
	case "AWSEvents":
		h.Set("Content-Type", "application/x-amz-json-1.1")
		body = `{"__type":"ThrottlingException","message":"Rate exceeded"}`
		if partial && target == "AWSEvents.PutEvents" {
			var in struct{ Entries []json.RawMessage }
			json.Unmarshal(reqBody, &in)
			entries := make([]map[string]string, len(in.Entries))
			for i := range entries {
				entries[i] = map[string]string{"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
			}
			b, _ := json.Marshal(map[string]any{"FailedEntryCount": len(entries), "Entries": entries})
			status, body = http.StatusOK, string(b)
		}
	default: // AmazonSSM and any other JSON-protocol service: the common error
		h.Set("Content-Type", "application/x-amz-json-1.1")
		body = `{"__type":"ThrottlingException","message":"Rate exceeded"}`
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)),
		Request: req,
	}
}
