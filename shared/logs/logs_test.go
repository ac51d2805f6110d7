package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

type recordingHandler struct{ ctxs []context.Context }

func (r *recordingHandler) Invoke(ctx context.Context, _ []byte) ([]byte, error) {
	r.ctxs = append(r.ctxs, ctx)
	return nil, nil
}

func TestLogLinesCarryTheInvocation(t *testing.T) {
	var out bytes.Buffer
	iv := &Invocations{}
	log := iv.logger(&out, "twice-prod-payments-api")
	inner := &recordingHandler{}
	h := iv.wrap(inner)
	for _, id := range []string{"req-1", "req-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		ctx = context.WithValue(ctx, "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1") //nolint:staticcheck // aws-lambda-go's key
		if _, err := h.Invoke(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	log.InfoContext(inner.ctxs[0], "with the first invocation's context")
	log.Info("without a context: the invocation in progress (the second)")

	type line struct {
		Level    string `json:"level"`
		Function string `json:"function_name"`
		Request  string `json:"function_request_id"`
		Cold     *bool  `json:"cold_start"`
		Trace    string `json:"xray_trace_id"`
	}
	var got []line
	for l := range strings.Lines(out.String()) {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, v)
	}
	if len(got) != 2 {
		t.Fatalf("%d lines: %s", len(got), out.String())
	}
	want := []struct {
		req  string
		cold bool
	}{{"req-1", true}, {"req-2", false}}
	for i, w := range want {
		g := got[i]
		if g.Level != "INFO" || g.Function != "twice-prod-payments-api" || g.Request != w.req || g.Cold == nil ||
			*g.Cold != w.cold || g.Trace != "1-5759e988-bd862e3fe1be46a994272793" {
			t.Errorf("line %d = %+v, want request %s cold %v", i, g, w.req, w.cold)
		}
	}
}

func TestOutsideAnInvocationOnlyTheFunction(t *testing.T) {
	var out bytes.Buffer
	(&Invocations{}).logger(&out, "fn").Info("init")
	if !strings.Contains(out.String(), `"function_name":"fn"`) || strings.Contains(out.String(), "function_request_id") {
		t.Fatalf("line %s", out.String())
	}
}
