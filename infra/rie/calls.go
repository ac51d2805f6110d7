package rie

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
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
// emulator really called, for the least-privilege test to compare with template.yaml.
type Recorder struct {
	URL   string // point AWS_ENDPOINT_URL_<SERVICE> here
	srv   *httptest.Server
	mu    sync.Mutex
	calls []Call
}

// NewRecorder proxies to target.
func NewRecorder(target string) (*Recorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	r := &Recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		calls := ActionsOf(req.Header.Get("X-Amz-Target"), body)
		r.mu.Lock()
		r.calls = append(r.calls, calls...)
		r.mu.Unlock()
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

// Close stops the proxy.
func (r *Recorder) Close() { r.srv.Close() }

// ActionsOf maps one JSON-protocol AWS request (its X-Amz-Target and body) to the IAM actions
// it needs. A transaction needs the action of each item on each item's table (IAM has no
// TransactWriteItems action of its own). Requests it does not know map to their target.
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
