package asl

import (
	"context"
	"encoding/json"
	"testing"
)

// Cases follow the examples in the AWS Step Functions developer guide ("Processing input
// and output": InputPath, Parameters, ResultSelector, ResultPath, OutputPath).
func TestInputOutputProcessing(t *testing.T) {
	const lambdaARN = "arn:aws:lambda:us-east-1:123456789012:function:HelloFunction"
	hello := func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		var v struct{ Who string }
		if err := json.Unmarshal(in, &v); err != nil {
			return nil, err
		}
		return json.Marshal("Hello, " + v.Who + "!")
	}
	echo := func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }
	tasks := TaskRegistry{lambdaARN: hello, "echo": echo,
		"emr": constTask(`{"ClusterId":"AKIAIOSFODNN7EXAMPLE","Name":"MyCluster","Status":{"State":"WAITING"},"Tags":[]}`)}

	tests := map[string]struct {
		state string // one state named S, End:true
		input string
		want  string
	}{
		"InputPath selects a subtree": {
			state: `{"Type":"Pass","InputPath":"$.dataset2"}`,
			input: `{"comment":"Example for InputPath.","dataset1":{"val1":1,"val2":2,"val3":3},"dataset2":{"val1":"a","val2":"b","val3":"c"}}`,
			want:  `{"val1":"a","val2":"b","val3":"c"}`,
		},
		"InputPath null gives an empty object": {
			state: `{"Type":"Pass","InputPath":null}`,
			input: `{"a":1}`, want: `{}`,
		},
		"Parameters with static and path fields": {
			state: `{"Type":"Pass","Parameters":{"comment":"Selecting what I care about.","MyDetails":{"size.$":"$.product.details.size","exists.$":"$.product.availability","StaticValue":"foo"}}}`,
			input: `{"comment":"Example for Parameters.","product":{"details":{"color":"blue","size":"small","material":"cotton"},"availability":"in stock","sku":"2317","cost":"$23"}}`,
			want:  `{"comment":"Selecting what I care about.","MyDetails":{"size":"small","exists":"in stock","StaticValue":"foo"}}`,
		},
		"Parameters from the context object": {
			state: `{"Type":"Pass","Parameters":{"name.$":"$$.Execution.Name","id.$":"$$.Execution.Id","entered.$":"$$.State.EnteredTime","retries.$":"$$.State.RetryCount","state.$":"$$.State.Name"}}`,
			input: `{}`,
			want:  `{"name":"ex","id":"arn:aws:states:local:000000000000:execution:sm:ex","entered":"2026-03-01T12:00:00.000Z","retries":0,"state":"S"}`,
		},
		"Parameters with intrinsic functions": {
			state: `{"Type":"Pass","Parameters":{"key.$":"States.Format('{}:{}', $.invoice, States.MathAdd($.attempt, 1))","n.$":"States.MathAdd($.attempt, 1)","arr.$":"States.Array($.invoice, 2)","len.$":"States.ArrayLength($.list)","obj.$":"States.StringToJson($.raw)","str.$":"States.JsonToString($.o)"}}`,
			input: `{"invoice":"in_1","attempt":2,"list":[1,2,3],"raw":"{\"a\":1}","o":{"b":true}}`,
			want:  `{"key":"in_1:3","n":3,"arr":["in_1",2],"len":3,"obj":{"a":1},"str":"{\"b\":true}"}`,
		},
		"Pass Result with ResultPath keeps the input": {
			state: `{"Type":"Pass","Result":{"x":1},"ResultPath":"$.r"}`,
			input: `{"a":1}`, want: `{"a":1,"r":{"x":1}}`,
		},
		"ResultPath appends the task result": {
			state: `{"Type":"Task","Resource":"` + lambdaARN + `","ResultPath":"$.taskresult"}`,
			input: `{"comment":"This is a test of the input and output of a Task state.","details":"Default example","who":"AWS Step Functions"}`,
			want:  `{"comment":"This is a test of the input and output of a Task state.","details":"Default example","who":"AWS Step Functions","taskresult":"Hello, AWS Step Functions!"}`,
		},
		"ResultPath $ replaces the input": {
			state: `{"Type":"Task","Resource":"` + lambdaARN + `","ResultPath":"$"}`,
			input: `{"who":"AWS Step Functions"}`, want: `"Hello, AWS Step Functions!"`,
		},
		"ResultPath null discards the result": {
			state: `{"Type":"Task","Resource":"` + lambdaARN + `","ResultPath":null}`,
			input: `{"who":"AWS Step Functions"}`, want: `{"who":"AWS Step Functions"}`,
		},
		"ResultPath nested creates objects": {
			state: `{"Type":"Task","Resource":"` + lambdaARN + `","ResultPath":"$.a.b['c']"}`,
			input: `{"who":"x","a":{"keep":1}}`, want: `{"who":"x","a":{"keep":1,"b":{"c":"Hello, x!"}}}`,
		},
		"InputPath ResultPath OutputPath together": {
			state: `{"Type":"Task","Resource":"` + lambdaARN + `","InputPath":"$.lambda","ResultPath":"$.data.lambdaresult","OutputPath":"$.data"}`,
			input: `{"comment":"An input comment.","data":{"val1":23,"val2":17},"extra":"foo","lambda":{"who":"AWS Step Functions"}}`,
			// ResultPath applies to the state's raw input, not to the InputPath selection.
			want: `{"val1":23,"val2":17,"lambdaresult":"Hello, AWS Step Functions!"}`,
		},
		"ResultSelector picks from the result": {
			state: `{"Type":"Task","Resource":"emr","ResultSelector":{"ClusterId.$":"$.ClusterId","ResourceType.$":"$.Name"},"ResultPath":"$.EMROutput"}`,
			input: `{"in":1}`, want: `{"in":1,"EMROutput":{"ClusterId":"AKIAIOSFODNN7EXAMPLE","ResourceType":"MyCluster"}}`,
		},
		"OutputPath null gives an empty object": {
			state: `{"Type":"Pass","OutputPath":null}`, input: `{"a":1}`, want: `{}`,
		},
		"lambda:invoke wraps the result in Payload": {
			state: `{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"` + lambdaARN + `","Payload.$":"$"},"ResultSelector":{"greeting.$":"$.Payload","code.$":"$.StatusCode"}}`,
			input: `{"who":"you"}`, want: `{"greeting":"Hello, you!","code":200}`,
		},
		"lambda:invoke by function name": {
			state: `{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"echo","Payload":{"k.$":"$.v"}},"OutputPath":"$.Payload"}`,
			input: `{"v":[1,2]}`, want: `{"k":[1,2]}`,
		},
		"non-singular path yields an array": {
			state: `{"Type":"Pass","Parameters":{"ids.$":"$.items[*].id"}}`,
			input: `{"items":[{"id":"a"},{"id":"b"}]}`, want: `{"ids":["a","b"]}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tasks)
			h.define("sm", `{"StartAt":"S","States":{"S":`+tc.state[:len(tc.state)-1]+`,"End":true}}}`)
			ex := h.await(h.start("sm", "ex", tc.input).ExecutionArn)
			if ex.Status != StatusSucceeded {
				t.Fatalf("status %s %s %s", ex.Status, ex.Error, ex.Cause)
			}
			jsonEqual(t, ex.Output, tc.want)
		})
	}
}

func TestInputOutputErrors(t *testing.T) {
	tests := map[string]struct {
		state, input, wantErr string
	}{
		"missing InputPath":           {`{"Type":"Pass","InputPath":"$.nope"}`, `{}`, ErrNameRuntime},
		"missing Parameters path":     {`{"Type":"Pass","Parameters":{"a.$":"$.nope"}}`, `{}`, ErrNameRuntime},
		"missing OutputPath":          {`{"Type":"Pass","OutputPath":"$.nope"}`, `{}`, ErrNameRuntime},
		"ResultPath through a scalar": {`{"Type":"Pass","Result":1,"ResultPath":"$.a.b"}`, `{"a":3}`, ErrNameResultPathMatchFailed},
		"MathAdd of a string":         {`{"Type":"Pass","Parameters":{"a.$":"States.MathAdd($.s, 1)"}}`, `{"s":"x"}`, ErrNameIntrinsicFailure},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{})
			h.define("sm", `{"StartAt":"S","States":{"S":`+tc.state[:len(tc.state)-1]+`,"End":true}}}`)
			ex := h.await(h.start("sm", "ex", tc.input).ExecutionArn)
			if ex.Status != StatusFailed || ex.Error != tc.wantErr {
				t.Fatalf("got %s %s (%s), want FAILED %s", ex.Status, ex.Error, ex.Cause, tc.wantErr)
			}
		})
	}
}
