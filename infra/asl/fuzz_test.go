package asl

import (
	"errors"
	"os"
	"testing"
)

func FuzzParse(f *testing.F) {
	if raw, err := os.ReadFile("testdata/recovery-example.asl.json"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte(`{"StartAt":"A","States":{"A":{"Type":"Pass","End":true}}}`))
	f.Add([]byte(`{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"And":[{"Variable":"$.a","IsPresent":true},{"Not":{"Variable":"$.b","StringMatches":"x*"}}],"Next":"E"}],"Default":"E"},"E":{"Type":"Succeed"}}}`))
	f.Add([]byte(`{"StartAt":"W","States":{"W":{"Type":"Wait","TimestampPath":"$.at","Next":"T"},"T":{"Type":"Task","Resource":"r","Parameters":{"k.$":"States.Format('{}', $.x)"},"Retry":[{"ErrorEquals":["States.ALL"],"JitterStrategy":"FULL"}],"End":true}}}`))
	f.Fuzz(func(t *testing.T, def []byte) {
		d, err := Parse(def)
		if err != nil {
			if !errors.Is(err, ErrInvalidDefinition) {
				t.Fatalf("error %v is not ErrInvalidDefinition", err)
			}
			return
		}
		if d.States[d.StartAt] == nil {
			t.Fatalf("parsed definition with StartAt %q missing", d.StartAt)
		}
	})
}

// FuzzPath feeds ASL paths, reference paths and intrinsic calls through compile and
// evaluation over a fixed document: nothing may panic.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"$", "$.a.b", "$['a']['b']", "$.list[0]", "$.list[*].id", "$..id", "$$.Execution.Name",
		"$.list[?@.id=='x']", "States.Format('{} {}', $.a.b, 3)", "States.MathAdd($.n, -1)", "States.Array(States.JsonToString($.a), 'x\\'y')",
		"States.StringToJson('{\"a\":1}')", "$.a.b.c"} {
		f.Add(s)
	}
	doc, _ := decode([]byte(`{"a":{"b":"c"},"n":4,"list":[{"id":"x"},{"id":"y"}],"s":"{\"q\":1}"}`))
	ctxObj, _ := decode([]byte(`{"Execution":{"Name":"ex","Id":"arn"},"State":{"RetryCount":0}}`))
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := compilePath(s); err == nil {
			_, _ = p.eval(doc, ctxObj)
			p.exists(doc, ctxObj)
		}
		if rp, err := compileRefPath(s); err == nil {
			if _, err := rp.set(doc, "v"); err != nil {
				var se *StatesError
				if !errors.As(err, &se) {
					t.Fatalf("set error %v is not a StatesError", err)
				}
			}
		}
		if fn, err := parseIntrinsic(s); err == nil {
			_, _ = fn.eval(doc, ctxObj)
		}
	})
}
