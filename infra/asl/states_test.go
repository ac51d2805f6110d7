package asl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChoiceRules(t *testing.T) {
	input := `{"s":"abc","n":5,"b":true,"ts":"2026-03-01T12:00:00Z","ts2":"2026-03-02T00:00:00Z","nul":null,"other":5,"str5":"5","pat":"a*c"}`
	tests := map[string]struct {
		rule string
		want bool
	}{
		"StringEquals":                  {`{"Variable":"$.s","StringEquals":"abc"}`, true},
		"StringEquals other":            {`{"Variable":"$.s","StringEquals":"abd"}`, false},
		"StringLessThan":                {`{"Variable":"$.s","StringLessThan":"abd"}`, true},
		"StringGreaterThan":             {`{"Variable":"$.s","StringGreaterThan":"abd"}`, false},
		"StringLessThanEquals":          {`{"Variable":"$.s","StringLessThanEquals":"abc"}`, true},
		"StringGreaterThanEquals":       {`{"Variable":"$.s","StringGreaterThanEquals":"abc"}`, true},
		"StringEqualsPath":              {`{"Variable":"$.s","StringEqualsPath":"$.s"}`, true},
		"StringMatches star":            {`{"Variable":"$.s","StringMatches":"a*"}`, true},
		"StringMatches middle":          {`{"Variable":"$.s","StringMatches":"*b*"}`, true},
		"StringMatches miss":            {`{"Variable":"$.s","StringMatches":"b*"}`, false},
		"StringMatches escaped star":    {`{"Variable":"$.pat","StringMatches":"a\\*c"}`, true},
		"StringMatches escaped literal": {`{"Variable":"$.s","StringMatches":"a\\*c"}`, false},
		"NumericEquals":                 {`{"Variable":"$.n","NumericEquals":5}`, true},
		"NumericLessThan":               {`{"Variable":"$.n","NumericLessThan":5}`, false},
		"NumericGreaterThan":            {`{"Variable":"$.n","NumericGreaterThan":4.5}`, true},
		"NumericLessThanEquals":         {`{"Variable":"$.n","NumericLessThanEquals":5}`, true},
		"NumericGreaterThanEquals":      {`{"Variable":"$.n","NumericGreaterThanEquals":6}`, false},
		"NumericEqualsPath":             {`{"Variable":"$.n","NumericEqualsPath":"$.other"}`, true},
		"NumericLessThanPath":           {`{"Variable":"$.n","NumericLessThanPath":"$.other"}`, false},
		"Numeric on a string is false":  {`{"Variable":"$.str5","NumericEquals":5}`, false},
		"BooleanEquals":                 {`{"Variable":"$.b","BooleanEquals":true}`, true},
		"BooleanEqualsPath":             {`{"Variable":"$.b","BooleanEqualsPath":"$.b"}`, true},
		"TimestampEquals":               {`{"Variable":"$.ts","TimestampEquals":"2026-03-01T13:00:00+01:00"}`, true},
		"TimestampLessThan":             {`{"Variable":"$.ts","TimestampLessThan":"2026-03-01T12:00:01Z"}`, true},
		"TimestampGreaterThan":          {`{"Variable":"$.ts","TimestampGreaterThan":"2026-03-01T12:00:01Z"}`, false},
		"TimestampLessThanEquals":       {`{"Variable":"$.ts","TimestampLessThanEquals":"2026-03-01T12:00:00Z"}`, true},
		"TimestampGreaterThanEquals":    {`{"Variable":"$.ts","TimestampGreaterThanEquals":"2026-03-01T12:00:00Z"}`, true},
		"TimestampLessThanPath":         {`{"Variable":"$.ts","TimestampLessThanPath":"$.ts2"}`, true},
		"IsPresent true":                {`{"Variable":"$.s","IsPresent":true}`, true},
		"IsPresent on missing":          {`{"Variable":"$.missing","IsPresent":true}`, false},
		"IsPresent false on missing":    {`{"Variable":"$.missing","IsPresent":false}`, true},
		"IsNull":                        {`{"Variable":"$.nul","IsNull":true}`, true},
		"IsNull on a string":            {`{"Variable":"$.s","IsNull":true}`, false},
		"IsString":                      {`{"Variable":"$.s","IsString":true}`, true},
		"IsNumeric":                     {`{"Variable":"$.str5","IsNumeric":true}`, false},
		"IsBoolean":                     {`{"Variable":"$.b","IsBoolean":true}`, true},
		"IsTimestamp":                   {`{"Variable":"$.ts","IsTimestamp":true}`, true},
		"IsTimestamp on text":           {`{"Variable":"$.s","IsTimestamp":false}`, true},
		"And":                           {`{"And":[{"Variable":"$.n","NumericGreaterThan":1},{"Variable":"$.s","StringEquals":"abc"}]}`, true},
		"And one false":                 {`{"And":[{"Variable":"$.n","NumericGreaterThan":9},{"Variable":"$.s","StringEquals":"abc"}]}`, false},
		"Or":                            {`{"Or":[{"Variable":"$.n","NumericGreaterThan":9},{"Variable":"$.s","StringEquals":"abc"}]}`, true},
		"Not":                           {`{"Not":{"Variable":"$.s","StringEquals":"abc"}}`, false},
		"context object variable":       {`{"Variable":"$$.Execution.Name","StringEquals":"ex"}`, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{})
			rule := tc.rule[:len(tc.rule)-1] + `,"Next":"Yes"}`
			h.define("sm", `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[`+rule+`],"Default":"No"},
				"Yes":{"Type":"Pass","Result":"yes","End":true},"No":{"Type":"Pass","Result":"no","End":true}}}`)
			ex := h.await(h.start("sm", "ex", input).ExecutionArn)
			want := `"no"`
			if tc.want {
				want = `"yes"`
			}
			if ex.Status != StatusSucceeded {
				t.Fatalf("status %s %s %s", ex.Status, ex.Error, ex.Cause)
			}
			jsonEqual(t, ex.Output, want)
		})
	}
}

func TestChoiceFailures(t *testing.T) {
	tests := map[string]struct{ choices, input, want string }{
		"no rule and no Default": {`[{"Variable":"$.n","NumericEquals":1,"Next":"E"}]`, `{"n":2}`, ErrNameNoChoiceMatched},
		"missing variable":       {`[{"Variable":"$.missing","NumericEquals":1,"Next":"E"}]`, `{"n":2}`, ErrNameRuntime},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{})
			h.define("sm", `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":`+tc.choices+`},"E":{"Type":"Succeed"}}}`)
			ex := h.await(h.start("sm", "ex", tc.input).ExecutionArn)
			if ex.Status != StatusFailed || ex.Error != tc.want {
				t.Fatalf("got %s %s, want FAILED %s", ex.Status, ex.Error, tc.want)
			}
		})
	}
}

func TestWait(t *testing.T) {
	tests := map[string]struct {
		wait, input string
		want        time.Duration // from start
	}{
		"Seconds":                      {`"Seconds":90`, `{}`, 90 * time.Second},
		"Timestamp":                    {`"Timestamp":"2026-03-02T12:00:00Z"`, `{}`, 24 * time.Hour},
		"SecondsPath":                  {`"SecondsPath":"$.delay"`, `{"delay":300}`, 300 * time.Second},
		"TimestampPath":                {`"TimestampPath":"$.at"`, `{"at":"2026-03-01T12:30:00Z"}`, 30 * time.Minute},
		"TimestampPath with InputPath": {`"InputPath":"$.plan","TimestampPath":"$.at"`, `{"plan":{"at":"2026-03-01T13:00:00+00:00"}}`, time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{})
			h.define("sm", `{"StartAt":"W","States":{"W":{"Type":"Wait",`+tc.wait+`,"Next":"Done"},"Done":{"Type":"Succeed"}}}`)
			arn := h.start("sm", "ex", tc.input).ExecutionArn
			h.clock.BlockUntil(1)
			h.clock.Advance(tc.want - time.Second)
			if ex, _ := h.runner.DescribeExecution(context.Background(), arn); ex.Status != StatusRunning {
				t.Fatalf("finished a second early: %s", ex.Status)
			}
			h.clock.BlockUntil(1)
			h.clock.Advance(time.Second)
			ex := h.await(arn)
			if ex.Status != StatusSucceeded {
				t.Fatalf("status %s %s", ex.Status, ex.Cause)
			}
			evs := h.history(arn)
			exited := evs[len(evs)-4] // then SucceedStateEntered, SucceedStateExited, ExecutionSucceeded
			if exited.Type != "WaitStateExited" || exited.Timestamp.Sub(t0) != tc.want {
				t.Fatalf("%s at +%s, want WaitStateExited at +%s", exited.Type, exited.Timestamp.Sub(t0), tc.want)
			}
		})
	}
}

func TestWaitBadSecondsPathFails(t *testing.T) {
	h := newHarness(t, TaskRegistry{})
	h.define("sm", `{"StartAt":"W","States":{"W":{"Type":"Wait","SecondsPath":"$.d","End":true}}}`)
	ex := h.await(h.start("sm", "ex", `{"d":"soon"}`).ExecutionArn)
	if ex.Status != StatusFailed || ex.Error != ErrNameRuntime {
		t.Fatalf("got %s %s", ex.Status, ex.Error)
	}
}

func TestSucceedAndFail(t *testing.T) {
	tests := map[string]struct {
		def                string
		status             Status
		output, err, cause string
	}{
		"Succeed with OutputPath": {`{"StartAt":"S","States":{"S":{"Type":"Succeed","OutputPath":"$.a"}}}`, StatusSucceeded, `1`, "", ""},
		"Fail":                    {`{"StartAt":"F","States":{"F":{"Type":"Fail","Error":"Declined","Cause":"hard decline"}}}`, StatusFailed, "", "Declined", "hard decline"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{})
			h.define("sm", tc.def)
			ex := h.await(h.start("sm", "ex", `{"a":1}`).ExecutionArn)
			if ex.Status != tc.status || ex.Error != tc.err || ex.Cause != tc.cause {
				t.Fatalf("got %+v", ex)
			}
			if tc.output != "" {
				jsonEqual(t, ex.Output, tc.output)
			}
		})
	}
}

// DeclineError stands in for a typed task error; its Lambda error name is its type name.
type DeclineError struct{ Code string }

func (e *DeclineError) Error() string { return "declined: " + e.Code }

type namedErr string

func (e namedErr) Error() string     { return string(e) }
func (e namedErr) ErrorName() string { return string(e) }

func TestErrorName(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"typed pointer":    {&DeclineError{}, "DeclineError"},
		"errors.New":       {errors.New("x"), "errorString"},
		"fmt.Errorf wrap":  {fmt_wrap(), "wrapError"},
		"ErrorName method": {namedErr("Lambda.ServiceException"), "Lambda.ServiceException"},
		"StatesError":      {&StatesError{Name: ErrNameTimeout}, ErrNameTimeout},
		// A Go Lambda handler names its error with an InvokeResponse_Error; Lambda reports its
		// Type as the errorType (recovery.LambdaHandler does this).
		"InvokeResponse_Error":          {messages.InvokeResponse_Error{Type: "Recovery.Transient", Message: "x"}, "Recovery.Transient"},
		"*InvokeResponse_Error wrapped": {fmt.Errorf("w: %w", &messages.InvokeResponse_Error{Type: "Recovery.Invalid"}), "Recovery.Invalid"},
		"InvokeResponse_Error, no Type": {messages.InvokeResponse_Error{Message: "x"}, "InvokeResponse_Error"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ErrorName(tc.err); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func fmt_wrap() error { return errorsJoinWrap(errors.New("inner")) }

func TestCatchRouting(t *testing.T) {
	def := `{"StartAt":"T","States":{
		"T":{"Type":"Task","Resource":"t","TimeoutSeconds":5,"Next":"Ok","Catch":[
			{"ErrorEquals":["DeclineError"],"Next":"Decline","ResultPath":"$.error"},
			{"ErrorEquals":["States.Timeout"],"Next":"Timeout","ResultPath":null},
			{"ErrorEquals":["States.TaskFailed"],"Next":"Other"}]},
		"Ok":{"Type":"Succeed"},"Decline":{"Type":"Succeed"},"Timeout":{"Type":"Succeed"},"Other":{"Type":"Succeed"}}}`
	block := make(chan struct{})
	tests := map[string]struct {
		fn       TaskFunc
		advance  bool
		endState string
		output   string
	}{
		"success": {constTask(`{"ok":true}`), false, "Ok", `{"ok":true}`},
		"typed error with ResultPath": {func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, &DeclineError{Code: "stolen_card"}
		}, false, "Decline", `{"in":1,"error":{"Error":"DeclineError","Cause":"{\"errorMessage\":\"declined: stolen_card\",\"errorType\":\"DeclineError\"}"}}`},
		"timeout with ResultPath null": {func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			select {
			case <-block:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}, true, "Timeout", `{"in":1}`},
		"panic is TaskFailed": {func(context.Context, json.RawMessage) (json.RawMessage, error) {
			panic("boom")
		}, false, "Other", `{"Error":"States.TaskFailed","Cause":"task panicked: boom"}`},
		"plain error is TaskFailed": {func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("nope")
		}, false, "Other", `{"Error":"errorString","Cause":"{\"errorMessage\":\"nope\",\"errorType\":\"errorString\"}"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, TaskRegistry{"t": tc.fn})
			h.define("sm", def)
			arn := h.start("sm", "ex", `{"in":1}`).ExecutionArn
			if tc.advance {
				h.clock.BlockUntil(1)
				h.clock.Advance(5 * time.Second)
			}
			ex := h.await(arn)
			evs := h.history(arn)
			last := evs[len(evs)-2] // before ExecutionSucceeded
			if ex.Status != StatusSucceeded || last.StateName != tc.endState {
				t.Fatalf("ended %s in %q, want %q (%v)", ex.Status, last.StateName, tc.endState, eventTypes(evs))
			}
			jsonEqual(t, ex.Output, tc.output)
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	tests := map[string]struct {
		retry string
		fails int
		// wantDelays are exact for NONE; for FULL each delay must lie in [0, bound].
		wantDelays []time.Duration
		full       bool
		status     Status
	}{
		"defaults: 1s x2, three attempts": {`{"ErrorEquals":["States.ALL"]}`, 3, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second}, false, StatusSucceeded},
		"exhausted fails":                 {`{"ErrorEquals":["States.ALL"],"MaxAttempts":2}`, 5, []time.Duration{1 * time.Second, 2 * time.Second}, false, StatusFailed},
		"MaxDelaySeconds caps":            {`{"ErrorEquals":["errorString"],"IntervalSeconds":10,"BackoffRate":3,"MaxAttempts":4,"MaxDelaySeconds":60}`, 4, []time.Duration{10 * time.Second, 30 * time.Second, 60 * time.Second, 60 * time.Second}, false, StatusSucceeded},
		"FULL jitter within bounds":       {`{"ErrorEquals":["States.TaskFailed"],"IntervalSeconds":2,"BackoffRate":2,"MaxAttempts":6,"MaxDelaySeconds":20,"JitterStrategy":"FULL"}`, 6, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second}, true, StatusSucceeded},
		"MaxAttempts 0 never retries":     {`{"ErrorEquals":["States.ALL"],"MaxAttempts":0}`, 1, nil, false, StatusFailed},
		"non-matching retrier":            {`{"ErrorEquals":["DeclineError"]}`, 1, nil, false, StatusFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var calls []time.Time
			var h *harness
			fn := func(context.Context, json.RawMessage) (json.RawMessage, error) {
				calls = append(calls, h.clock.Now())
				if len(calls) <= tc.fails {
					return nil, errors.New("transient")
				}
				return json.RawMessage(`{"n":1}`), nil
			}
			h = newHarness(t, TaskRegistry{"t": fn})
			h.define("sm", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"t","End":true,"Retry":[`+tc.retry+`]}}}`)
			arn := h.start("sm", "ex", `{}`).ExecutionArn
			for range tc.wantDelays {
				h.clock.BlockUntil(1)
				h.clock.AdvanceToNext()
			}
			ex := h.await(arn)
			if ex.Status != tc.status {
				t.Fatalf("status %s %s", ex.Status, ex.Error)
			}
			if len(calls) != len(tc.wantDelays)+1 {
				t.Fatalf("%d calls, want %d", len(calls), len(tc.wantDelays)+1)
			}
			for i, want := range tc.wantDelays {
				got := calls[i+1].Sub(calls[i])
				if tc.full && (got < 0 || got > want) || !tc.full && got != want {
					t.Errorf("delay %d = %s, want %s (full jitter: %v)", i, got, want, tc.full)
				}
			}
			if ex.StateTransitions != 1+len(tc.wantDelays) {
				t.Errorf("transitions %d, want %d", ex.StateTransitions, 1+len(tc.wantDelays))
			}
		})
	}
}

func TestFullJitterSpreads(t *testing.T) {
	r := New(nil, TaskRegistry{}, WithRand(newSeeded()))
	rt := Retrier{IntervalSeconds: 10, BackoffRate: 2, MaxDelaySeconds: 15, JitterStrategy: "FULL"}
	var lo, hi time.Duration = time.Hour, 0
	for i := 0; i < 1000; i++ {
		d := r.backoff(rt, 3) // 80 s capped at 15 s
		if d < 0 || d > 15*time.Second {
			t.Fatalf("delay %s outside [0, 15s]", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 2*time.Second || hi < 13*time.Second {
		t.Fatalf("jitter does not spread over the range: [%s, %s]", lo, hi)
	}
}

func TestStartExecutionRules(t *testing.T) {
	h := newHarness(t, TaskRegistry{})
	h.define("sm", `{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":60,"End":true}}}`)
	ctx := context.Background()
	first := h.start("sm", "inv_1-round-1", `{"a": 1}`)

	again, err := h.runner.StartExecution(ctx, "sm", "inv_1-round-1", []byte(`{"a":1}`))
	if err != nil || again.ExecutionArn != first.ExecutionArn || !again.StartDate.Equal(first.StartDate) {
		t.Fatalf("same name and input while running: %v %+v", err, again)
	}
	if _, err := h.runner.StartExecution(ctx, "sm", "inv_1-round-1", []byte(`{"a":2}`)); !errors.Is(err, ErrExecutionAlreadyExists) {
		t.Fatalf("different input: %v, want ErrExecutionAlreadyExists", err)
	}
	h.clock.BlockUntil(1)
	h.clock.Advance(time.Minute)
	if ex := h.await(first.ExecutionArn); ex.Status != StatusSucceeded {
		t.Fatalf("status %s", ex.Status)
	}
	if _, err := h.runner.StartExecution(ctx, "sm", "inv_1-round-1", []byte(`{"a":1}`)); !errors.Is(err, ErrExecutionAlreadyExists) {
		t.Fatalf("closed execution: %v, want ErrExecutionAlreadyExists", err)
	}

	names := map[string]error{
		"ok_name-1.2":           nil,
		strings.Repeat("a", 80): nil,
		strings.Repeat("a", 81): ErrInvalidName,
		"":                      ErrInvalidName,
		"has space":             ErrInvalidName,
		"colon:x":               ErrInvalidName,
		"slash/x":               ErrInvalidName,
		"star*":                 ErrInvalidName,
		"ctrl\x01":              ErrInvalidName,
	}
	for name, want := range names {
		_, err := h.runner.StartExecution(ctx, "sm", name, nil)
		if !errors.Is(err, want) {
			t.Errorf("name %q: %v, want %v", name, err, want)
		}
	}
	if _, err := h.runner.StartExecution(ctx, "nope", "x", nil); !errors.Is(err, ErrStateMachineDoesNotExist) {
		t.Errorf("unknown machine: %v", err)
	}
	if _, err := h.runner.StartExecution(ctx, "sm", "bad-input", []byte(`{`)); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("bad input: %v", err)
	}
	list, err := h.runner.ListExecutions(ctx, "sm")
	if err != nil || len(list) != 3 { // inv_1-round-1, ok_name-1.2, aaaa...
		t.Fatalf("ListExecutions: %v, %d executions", err, len(list))
	}
	if !slices.ContainsFunc(list, func(e Execution) bool { return e.Name == "ok_name-1.2" }) {
		t.Fatalf("ListExecutions misses ok_name-1.2")
	}
}
