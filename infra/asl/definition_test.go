package asl

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseRejects(t *testing.T) {
	tests := map[string]struct{ def, problem string }{
		"not JSON":              {`{`, "not a JSON object"},
		"no states":             {`{"StartAt":"A","States":{}}`, "States is empty"},
		"StartAt missing":       {`{"StartAt":"B","States":{"A":{"Type":"Succeed"}}}`, `StartAt "B"`},
		"unknown type":          {`{"StartAt":"A","States":{"A":{"Type":"Sleep","End":true}}}`, `unknown state type "Sleep"`},
		"Map unsupported":       {`{"StartAt":"A","States":{"A":{"Type":"Map","End":true}}}`, "not supported"},
		"no Next or End":        {`{"StartAt":"A","States":{"A":{"Type":"Pass"}}}`, "exactly one of Next or End"},
		"both Next and End":     {`{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"A","End":true}}}`, "exactly one of Next or End"},
		"dangling Next":         {`{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"Z"}}}`, `Next "Z" is not a state`},
		"dangling Catch":        {`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","End":true,"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Z"}]}}}`, `Catch Next "Z"`},
		"dangling Default":      {`{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[{"Variable":"$.x","IsNull":true,"Next":"A"}],"Default":"Z"}}}`, `Default "Z"`},
		"Task without Resource": {`{"StartAt":"A","States":{"A":{"Type":"Task","End":true}}}`, "Resource"},
		"two Wait fields":       {`{"StartAt":"A","States":{"A":{"Type":"Wait","Seconds":1,"SecondsPath":"$.s","End":true}}}`, "exactly one of Seconds"},
		"bad path":              {`{"StartAt":"A","States":{"A":{"Type":"Pass","InputPath":"$[","End":true}}}`, "path"},
		"bad ResultPath":        {`{"StartAt":"A","States":{"A":{"Type":"Pass","ResultPath":"$.a[0]","End":true}}}`, "must name fields only"},
		"bad jitter":            {`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","End":true,"Retry":[{"ErrorEquals":["X"],"JitterStrategy":"HALF"}]}}}`, "JitterStrategy"},
		"unknown operator":      {`{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[{"Variable":"$.x","StringIs":"a","Next":"A"}]}}}`, "unknown comparison operator"},
		"operand type":          {`{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[{"Variable":"$.x","NumericEquals":"1","Next":"A"}]}}}`, "wrong type"},
		"top rule without Next": {`{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[{"Variable":"$.x","IsNull":true}],"Default":"A"}}}`, "needs Next"},
		"unknown intrinsic":     {`{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"a.$":"States.Nope(1)"},"End":true}}}`, "unknown intrinsic"},
		"intrinsic arity":       {`{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"a.$":"States.MathAdd(1)"},"End":true}}}`, "wrong number"},
		"callback timeout":      {`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","TimeoutSecondsPath":"$.t","End":true}}}`, "TimeoutSecondsPath is not supported"},
		"heartbeat":             {`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","HeartbeatSeconds":60,"End":true}}}`, "HeartbeatSeconds is not supported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.def))
			var de *DefinitionError
			if !errors.Is(err, ErrInvalidDefinition) || !errors.As(err, &de) {
				t.Fatalf("got %v, want a DefinitionError", err)
			}
			if !strings.Contains(err.Error(), tc.problem) {
				t.Fatalf("%v does not mention %q", err, tc.problem)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	def := []byte(`{"Resource":"${ChargeFunctionArn}","Other":"${Missing}","Plain":"$.x"}`)
	got := string(Substitute(def, map[string]string{"ChargeFunctionArn": "arn:aws:lambda:local:0:function:charge"}))
	want := `{"Resource":"arn:aws:lambda:local:0:function:charge","Other":"${Missing}","Plain":"$.x"}`
	if got != want {
		t.Fatalf("got %s", got)
	}
}

func TestExampleDefinitionParses(t *testing.T) {
	raw, err := os.ReadFile("testdata/recovery-example.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	def, err := Parse(Substitute(raw, map[string]string{"ClassifyFunctionArn": "classify", "ChargeFunctionArn": "charge"}))
	if err != nil {
		t.Fatal(err)
	}
	if def.StartAt != "Classify" || len(def.States) != 7 {
		t.Fatalf("StartAt %s, %d states", def.StartAt, len(def.States))
	}
}
