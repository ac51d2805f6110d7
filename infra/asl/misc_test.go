package asl

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
)

func TestIntrinsics(t *testing.T) {
	doc, _ := decode([]byte(`{"a":"x","n":2,"arr":[1,"b",{"c":1}],"obj":{"k":[1]},"s":"[1,2]"}`))
	tests := map[string]struct {
		call, want string
		fails      bool
	}{
		"Format":                {call: `States.Format('a={} n={}', $.a, $.n)`, want: `"a=x n=2"`},
		"Format escapes":        {call: `States.Format('\{\} {} it\'s', $.a)`, want: `"{} x it's"`},
		"Format bool and null":  {call: `States.Format('{} {}', true, null)`, want: `"true null"`},
		"Format too few args":   {call: `States.Format('{} {}', $.a)`, fails: true},
		"Format object arg":     {call: `States.Format('{}', $.obj)`, fails: true},
		"MathAdd":               {call: `States.MathAdd($.n, -5)`, want: `-3`},
		"MathAdd fraction":      {call: `States.MathAdd($.n, 1.5)`, fails: true},
		"Array":                 {call: `States.Array($.a, 1, States.Array())`, want: `["x",1,[]]`},
		"ArrayLength":           {call: `States.ArrayLength($.arr)`, want: `3`},
		"ArrayGetItem":          {call: `States.ArrayGetItem($.arr, 1)`, want: `"b"`},
		"ArrayGetItem range":    {call: `States.ArrayGetItem($.arr, 3)`, fails: true},
		"ArrayContains object":  {call: `States.ArrayContains($.arr, $.arr[2])`, want: `true`},
		"ArrayContains missing": {call: `States.ArrayContains($.arr, 'c')`, want: `false`},
		"StringToJson":          {call: `States.StringToJson($.s)`, want: `[1,2]`},
		"JsonToString":          {call: `States.JsonToString($.obj)`, want: `"{\"k\":[1]}"`},
		"nested":                {call: `States.JsonToString(States.StringToJson($.s))`, want: `"[1,2]"`},
		"missing path":          {call: `States.Format('{}', $.nope)`, fails: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fn, err := parseIntrinsic(tc.call)
			if err != nil {
				t.Fatal(err)
			}
			v, err := fn.eval(doc, nil)
			if tc.fails {
				if err == nil {
					t.Fatalf("got %v, want an error", v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			jsonEqual(t, b, tc.want)
		})
	}
}

func TestUnknownResourceIsCatchable(t *testing.T) {
	h := newHarness(t, TaskRegistry{})
	h.define("sm", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:lambda:us-east-1:0:function:gone","End":true,
		"Catch":[{"ErrorEquals":["Lambda.ResourceNotFoundException"],"Next":"C"}]},"C":{"Type":"Pass","End":true}}}`)
	ex := h.await(h.start("sm", "ex", `{}`).ExecutionArn)
	if ex.Status != StatusSucceeded {
		t.Fatalf("status %s %s", ex.Status, ex.Error)
	}
}

func TestConcurrencyBound(t *testing.T) {
	var running, peak, calls atomic.Int32
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	fn := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if calls.Add(1) <= 2 {
			started.Done()
		}
		<-release
		running.Add(-1)
		return json.RawMessage(`{}`), nil
	}
	h := newHarness(t, TaskRegistry{"t": fn}, WithConcurrency(2))
	h.define("sm", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"t","End":true}}}`)
	var arns []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		arns = append(arns, h.start("sm", n, `{}`).ExecutionArn)
	}
	started.Wait() // two tasks hold both slots
	close(release)
	for _, arn := range arns {
		if ex := h.await(arn); ex.Status != StatusSucceeded {
			t.Fatalf("status %s %s %s", ex.Status, ex.Error, ex.Cause)
		}
	}
	if peak.Load() != 2 {
		t.Fatalf("peak concurrency %d, want 2", peak.Load())
	}
}

func TestTaskTimeoutTimerReleased(t *testing.T) {
	h := newHarness(t, TaskRegistry{"t": constTask(`1`)})
	h.define("sm", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"t","TimeoutSeconds":30,"End":true}}}`)
	if ex := h.await(h.start("sm", "ex", `{}`).ExecutionArn); ex.Status != StatusSucceeded {
		t.Fatalf("status %s", ex.Status)
	}
	if n := h.clock.Waiters(); n != 0 {
		t.Fatalf("%d timers left pending after the task finished", n)
	}
}
