package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Call is one IAM action a function's request needed, on one resource: a DynamoDB table (or
// "table/index/name"), an SQS queue URL, a state machine ARN, an SSM parameter name.
type Call struct {
	Action   string // "dynamodb:PutItem", "sqs:SendMessage", "states:StartExecution"
	Resource string
}

// Recorder is a reverse proxy in front of an AWS API endpoint (DynamoDB Local, moto) that
// records the IAM actions of every request passing through it: what a function under the
// emulator really called, for the least-privilege test to compare with template.yaml. It also
// meters what the requests cost (Usage): it asks DynamoDB for the capacity each request
// consumed (ReturnConsumedCapacity TOTAL, added to every request that takes it) and reads it
// from the answer.
type Recorder struct {
	URL   string // point AWS_ENDPOINT_URL_<SERVICE> here
	srv   *httptest.Server
	mu    sync.Mutex
	calls []Call
	usage Usage
}

// NewRecorder proxies to target.
func NewRecorder(target string) (*Recorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	r := &Recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		target := resp.Request.Header.Get("X-Amz-Target")
		if !strings.HasPrefix(target, "DynamoDB_") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		sent, _ := resp.Request.Context().Value(sentKey{}).([]byte)
		wru, rru, tables := consumed(target, resp.StatusCode, body, sent)
		r.mu.Lock()
		r.usage.WriteUnits += wru
		r.usage.ReadUnits += rru
		if r.usage.TableWriteUnits == nil {
			r.usage.TableWriteUnits = map[string]float64{}
		}
		for t, n := range tables {
			r.usage.TableWriteUnits[t] += n
		}
		r.mu.Unlock()
		return nil
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		target := req.Header.Get("X-Amz-Target")
		calls := ActionsOf(target, body)
		r.mu.Lock()
		r.calls = append(r.calls, calls...)
		r.usage.add(target, body)
		r.mu.Unlock()
		if strings.HasPrefix(target, "DynamoDB_") {
			body = withConsumedCapacity(body)
			// The request as sent, for billing a write DynamoDB refused (it reports no
			// capacity then).
			req = req.WithContext(context.WithValue(req.Context(), sentKey{}, body))
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		proxy.ServeHTTP(w, req)
	}))
	r.URL = r.srv.URL
	return r, nil
}

// Calls returns what was recorded, sorted and without repeats.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.calls)
	slices.SortFunc(out, func(a, b Call) int { return strings.Compare(a.Action+" "+a.Resource, b.Action+" "+b.Resource) })
	return slices.Compact(out)
}

// Usage returns what the requests so far cost.
func (r *Recorder) Usage() Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.usage
	u.Requests = maps.Clone(r.usage.Requests)
	u.TableWriteUnits = maps.Clone(r.usage.TableWriteUnits)
	return u
}

// Close stops the proxy.
func (r *Recorder) Close() { r.srv.Close() }

// ActionsOf maps one JSON-protocol AWS request (its X-Amz-Target and body) to the IAM actions
// it needs. A transaction needs the action of each item on each item's table (IAM has no
// TransactWriteItems action of its own); a batch needs its own action (BatchWriteItem) on each
// table it names. Requests it does not know map to their target.
func ActionsOf(target string, body []byte) []Call {
	svc, op, ok := strings.Cut(target, ".")
	if !ok {
		return nil
	}
	var in struct {
		TableName       string
		IndexName       string
		QueueUrl        string //nolint:revive // the wire name
		StateMachineArn string `json:"stateMachineArn"`
		Name            string
		TransactItems   []map[string]struct{ TableName string }
		RequestItems    map[string]json.RawMessage
	}
	_ = json.Unmarshal(body, &in)
	switch {
	case strings.HasPrefix(svc, "DynamoDB_"):
		if op == "TransactWriteItems" {
			var out []Call
			for _, it := range in.TransactItems {
				for kind, x := range it {
					action := map[string]string{"Put": "PutItem", "Delete": "DeleteItem", "Update": "UpdateItem", "ConditionCheck": "ConditionCheckItem"}[kind]
					out = append(out, Call{"dynamodb:" + action, x.TableName})
				}
			}
			return out
		}
		if op == "BatchWriteItem" || op == "BatchGetItem" {
			// IAM checks the batch action itself on each table the batch names.
			out := make([]Call, 0, len(in.RequestItems))
			for _, table := range slices.Sorted(maps.Keys(in.RequestItems)) {
				out = append(out, Call{"dynamodb:" + op, table})
			}
			return out
		}
		res := in.TableName
		if in.IndexName != "" {
			res += "/index/" + in.IndexName
		}
		return []Call{{"dynamodb:" + op, res}}
	case svc == "AmazonSQS":
		return []Call{{"sqs:" + op, in.QueueUrl}}
	case svc == "AWSStepFunctions":
		return []Call{{"states:" + op, in.StateMachineArn}}
	case svc == "AmazonSSM":
		return []Call{{"ssm:" + op, in.Name}}
	}
	return []Call{{target, ""}}
}
