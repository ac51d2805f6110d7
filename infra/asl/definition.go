package asl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Definition is a parsed, validated state machine.
type Definition struct {
	StartAt        string
	TimeoutSeconds int
	States         map[string]*State
}

// State is one parsed state. Only the fields its Type uses are set.
type State struct {
	Name string
	Type string // Task, Choice, Wait, Pass, Succeed, Fail
	Next string
	End  bool

	inputPath      *path // nil with inputNull false: "$"
	inputNull      bool
	outputPath     *path
	outputNull     bool
	resultPath     *refPath
	resultNull     bool
	parameters     *template
	resultSelector *template

	// Task
	Resource       string
	TimeoutSeconds int
	Retry          []Retrier
	Catch          []Catcher

	// Pass
	result    any
	hasResult bool

	// Wait
	seconds       *int
	timestamp     string
	secondsPath   *path
	timestampPath *path

	// Choice
	Choices []*ChoiceRule
	Default string

	// Fail
	Error, Cause string
}

// Retrier is one Retry entry.
type Retrier struct {
	ErrorEquals     []string
	IntervalSeconds float64
	MaxAttempts     int
	BackoffRate     float64
	MaxDelaySeconds float64
	JitterStrategy  string
}

// Catcher is one Catch entry.
type Catcher struct {
	ErrorEquals []string
	Next        string
	resultPath  *refPath
	resultNull  bool
}

// ChoiceRule is a Choice rule: a comparison, or And/Or/Not over nested rules.
type ChoiceRule struct {
	Next      string
	variable  *path
	op        string
	value     any   // literal operand
	valuePath *path // operand of a ...Path operator
	and, or   []*ChoiceRule
	not       *ChoiceRule
}

// Substitute fills ${Name} placeholders the way DefinitionSubstitutions does; a placeholder
// with no value is left as it is, so validation or the task registry reports it.
func Substitute(def []byte, vars map[string]string) []byte {
	return placeholder.ReplaceAllFunc(def, func(m []byte) []byte {
		if v, ok := vars[string(m[2:len(m)-1])]; ok {
			return []byte(v)
		}
		return m
	})
}

var placeholder = regexp.MustCompile(`\$\{[A-Za-z0-9_.:-]+\}`)

type rawState struct {
	Type           string          `json:"Type"`
	Next           string          `json:"Next"`
	End            bool            `json:"End"`
	InputPath      json.RawMessage `json:"InputPath"`
	OutputPath     json.RawMessage `json:"OutputPath"`
	ResultPath     json.RawMessage `json:"ResultPath"`
	Parameters     json.RawMessage `json:"Parameters"`
	ResultSelector json.RawMessage `json:"ResultSelector"`
	Resource       string          `json:"Resource"`
	TimeoutSeconds int             `json:"TimeoutSeconds"`
	// TimeoutSecondsPath and HeartbeatSeconds are parsed so that they can be refused.
	TimeoutSecondsPath string `json:"TimeoutSecondsPath"`
	HeartbeatSeconds   *int   `json:"HeartbeatSeconds"`
	HeartbeatPath      string `json:"HeartbeatSecondsPath"`
	Retry              []struct {
		ErrorEquals     []string `json:"ErrorEquals"`
		IntervalSeconds *float64 `json:"IntervalSeconds"`
		MaxAttempts     *int     `json:"MaxAttempts"`
		BackoffRate     *float64 `json:"BackoffRate"`
		MaxDelaySeconds float64  `json:"MaxDelaySeconds"`
		JitterStrategy  string   `json:"JitterStrategy"`
	} `json:"Retry"`
	Catch []struct {
		ErrorEquals []string        `json:"ErrorEquals"`
		Next        string          `json:"Next"`
		ResultPath  json.RawMessage `json:"ResultPath"`
	} `json:"Catch"`
	Result        json.RawMessage   `json:"Result"`
	Seconds       *int              `json:"Seconds"`
	Timestamp     string            `json:"Timestamp"`
	SecondsPath   string            `json:"SecondsPath"`
	TimestampPath string            `json:"TimestampPath"`
	Choices       []json.RawMessage `json:"Choices"`
	Default       string            `json:"Default"`
	Error         string            `json:"Error"`
	Cause         string            `json:"Cause"`
}

// Parse parses and validates a definition (after Substitute). Every problem found is
// reported in one *DefinitionError.
func Parse(def []byte) (*Definition, error) {
	var raw struct {
		StartAt        string                     `json:"StartAt"`
		TimeoutSeconds int                        `json:"TimeoutSeconds"`
		States         map[string]json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal(def, &raw); err != nil {
		return nil, &DefinitionError{Problems: []string{"not a JSON object: " + err.Error()}}
	}
	d := &Definition{StartAt: raw.StartAt, TimeoutSeconds: raw.TimeoutSeconds, States: map[string]*State{}}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(raw.States) == 0 {
		bad("States is empty")
	}
	names := make([]string, 0, len(raw.States))
	for n := range raw.States {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		s, err := parseState(name, raw.States[name])
		if err != nil {
			bad("state %q: %v", name, err)
			continue
		}
		d.States[name] = s
	}
	if _, ok := raw.States[raw.StartAt]; !ok {
		bad("StartAt %q is not a state", raw.StartAt)
	}
	exists := func(from, what, target string) {
		if _, ok := raw.States[target]; !ok {
			bad("state %q: %s %q is not a state", from, what, target)
		}
	}
	for _, name := range names {
		s := d.States[name]
		if s == nil {
			continue
		}
		if s.Next != "" {
			exists(name, "Next", s.Next)
		}
		for _, c := range s.Catch {
			exists(name, "Catch Next", c.Next)
		}
		for _, c := range s.Choices {
			exists(name, "Choice Next", c.Next)
		}
		if s.Default != "" {
			exists(name, "Default", s.Default)
		}
	}
	if problems != nil {
		return nil, &DefinitionError{Problems: problems}
	}
	return d, nil
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// optPath reads an optional path field: absent (nil, false), null (nil, true: the field's
// "discard" meaning), or a string that compile compiles; name is the field in the error.
func optPath[P any](raw json.RawMessage, name string, compile func(string) (*P, error)) (*P, bool, error) {
	if raw == nil {
		return nil, false, nil
	}
	if isNull(raw) {
		return nil, true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, fmt.Errorf("%s must be a string or null", name)
	}
	p, err := compile(s)
	return p, false, err
}

func optTemplate(raw json.RawMessage) (*template, error) {
	if raw == nil {
		return nil, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	return compileTemplate(v)
}

func parseState(name string, msg json.RawMessage) (*State, error) {
	if len(name) == 0 || len(name) > 80 {
		return nil, fmt.Errorf("name must be 1-80 characters")
	}
	var r rawState
	if err := json.Unmarshal(msg, &r); err != nil {
		return nil, err
	}
	s := &State{Name: name, Type: r.Type, Next: r.Next, End: r.End, Resource: r.Resource,
		TimeoutSeconds: r.TimeoutSeconds, Default: r.Default, Error: r.Error, Cause: r.Cause}
	var err error
	if s.inputPath, s.inputNull, err = optPath(r.InputPath, "path", compilePath); err != nil {
		return nil, err
	}
	if s.outputPath, s.outputNull, err = optPath(r.OutputPath, "path", compilePath); err != nil {
		return nil, err
	}
	if s.resultPath, s.resultNull, err = optPath(r.ResultPath, "ResultPath", compileRefPath); err != nil {
		return nil, err
	}
	if s.parameters, err = optTemplate(r.Parameters); err != nil {
		return nil, fmt.Errorf("Parameters: %w", err)
	}
	if s.resultSelector, err = optTemplate(r.ResultSelector); err != nil {
		return nil, fmt.Errorf("ResultSelector: %w", err)
	}
	needsTransition := false
	switch r.Type {
	case "Task":
		needsTransition = true
		if r.Resource == "" {
			return nil, fmt.Errorf("Task needs a Resource")
		}
		if r.TimeoutSeconds < 0 {
			return nil, fmt.Errorf("TimeoutSeconds must be positive")
		}
		if r.HeartbeatSeconds != nil || r.HeartbeatPath != "" {
			return nil, fmt.Errorf("HeartbeatSeconds is not supported by the local runner")
		}
		if r.TimeoutSecondsPath != "" {
			return nil, fmt.Errorf("TimeoutSecondsPath is not supported by the local runner")
		}
		for _, rt := range r.Retry {
			ret := Retrier{ErrorEquals: rt.ErrorEquals, IntervalSeconds: 1, MaxAttempts: 3, BackoffRate: 2,
				MaxDelaySeconds: rt.MaxDelaySeconds, JitterStrategy: rt.JitterStrategy}
			if rt.IntervalSeconds != nil {
				ret.IntervalSeconds = *rt.IntervalSeconds
			}
			if rt.MaxAttempts != nil {
				ret.MaxAttempts = *rt.MaxAttempts
			}
			if rt.BackoffRate != nil {
				ret.BackoffRate = *rt.BackoffRate
			}
			switch {
			case len(ret.ErrorEquals) == 0:
				return nil, fmt.Errorf("Retry needs ErrorEquals")
			case ret.IntervalSeconds < 1 || ret.MaxAttempts < 0 || ret.BackoffRate < 1 || ret.MaxDelaySeconds < 0:
				return nil, fmt.Errorf("Retry: IntervalSeconds >= 1, MaxAttempts >= 0, BackoffRate >= 1, MaxDelaySeconds >= 0")
			case ret.JitterStrategy != "" && ret.JitterStrategy != "FULL" && ret.JitterStrategy != "NONE":
				return nil, fmt.Errorf("JitterStrategy must be FULL or NONE")
			}
			s.Retry = append(s.Retry, ret)
		}
		for _, c := range r.Catch {
			ct := Catcher{ErrorEquals: c.ErrorEquals, Next: c.Next}
			if ct.resultPath, ct.resultNull, err = optPath(c.ResultPath, "ResultPath", compileRefPath); err != nil {
				return nil, err
			}
			if len(ct.ErrorEquals) == 0 || ct.Next == "" {
				return nil, fmt.Errorf("Catch needs ErrorEquals and Next")
			}
			s.Catch = append(s.Catch, ct)
		}
	case "Pass":
		needsTransition = true
		if r.Result != nil {
			if s.result, err = decode(r.Result); err != nil {
				return nil, err
			}
			s.hasResult = true
		}
	case "Wait":
		needsTransition = true
		n := 0
		if r.Seconds != nil {
			n++
			if *r.Seconds < 0 {
				return nil, fmt.Errorf("Seconds must not be negative")
			}
			s.seconds = r.Seconds
		}
		if r.Timestamp != "" {
			n++
			if _, err := parseTimestamp(r.Timestamp); err != nil {
				return nil, fmt.Errorf("Timestamp: %w", err)
			}
			s.timestamp = r.Timestamp
		}
		if r.SecondsPath != "" {
			n++
			if s.secondsPath, err = compilePath(r.SecondsPath); err != nil {
				return nil, err
			}
		}
		if r.TimestampPath != "" {
			n++
			if s.timestampPath, err = compilePath(r.TimestampPath); err != nil {
				return nil, err
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("Wait needs exactly one of Seconds, Timestamp, SecondsPath, TimestampPath")
		}
	case "Choice":
		if len(r.Choices) == 0 {
			return nil, fmt.Errorf("Choice needs Choices")
		}
		for i, c := range r.Choices {
			rule, err := parseChoiceRule(c, true)
			if err != nil {
				return nil, fmt.Errorf("Choices[%d]: %w", i, err)
			}
			s.Choices = append(s.Choices, rule)
		}
		if r.Next != "" || r.End {
			return nil, fmt.Errorf("Choice must not have Next or End")
		}
	case "Succeed", "Fail":
		if r.Next != "" || r.End {
			return nil, fmt.Errorf("%s must not have Next or End", r.Type)
		}
	case "Map", "Parallel":
		return nil, fmt.Errorf("state type %s is not supported by this runner", r.Type)
	default:
		return nil, fmt.Errorf("unknown state type %q", r.Type)
	}
	if needsTransition && (r.Next == "") == !r.End {
		return nil, fmt.Errorf("%s needs exactly one of Next or End", r.Type)
	}
	return s, nil
}

var comparisonOps = map[string]bool{
	"StringEquals": true, "StringLessThan": true, "StringGreaterThan": true,
	"StringLessThanEquals": true, "StringGreaterThanEquals": true, "StringMatches": true,
	"NumericEquals": true, "NumericLessThan": true, "NumericGreaterThan": true,
	"NumericLessThanEquals": true, "NumericGreaterThanEquals": true,
	"BooleanEquals":   true,
	"TimestampEquals": true, "TimestampLessThan": true, "TimestampGreaterThan": true,
	"TimestampLessThanEquals": true, "TimestampGreaterThanEquals": true,
	"IsNull": true, "IsPresent": true, "IsNumeric": true, "IsString": true, "IsBoolean": true, "IsTimestamp": true,
}

func parseChoiceRule(msg json.RawMessage, top bool) (*ChoiceRule, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return nil, err
	}
	rule := &ChoiceRule{}
	if n, ok := fields["Next"]; ok {
		if err := json.Unmarshal(n, &rule.Next); err != nil {
			return nil, err
		}
	}
	if top && rule.Next == "" {
		return nil, fmt.Errorf("a top-level rule needs Next")
	}
	if !top && rule.Next != "" {
		return nil, fmt.Errorf("a nested rule must not have Next")
	}
	nested := func(key string) ([]*ChoiceRule, error) {
		var list []json.RawMessage
		if err := json.Unmarshal(fields[key], &list); err != nil || len(list) == 0 {
			return nil, fmt.Errorf("%s needs a non-empty array of rules", key)
		}
		out := make([]*ChoiceRule, 0, len(list))
		for _, m := range list {
			r, err := parseChoiceRule(m, false)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	var err error
	switch {
	case fields["And"] != nil:
		rule.and, err = nested("And")
		return rule, err
	case fields["Or"] != nil:
		rule.or, err = nested("Or")
		return rule, err
	case fields["Not"] != nil:
		rule.not, err = parseChoiceRule(fields["Not"], false)
		return rule, err
	}
	var variable string
	if err := json.Unmarshal(fields["Variable"], &variable); err != nil {
		return nil, fmt.Errorf("rule needs a Variable")
	}
	if rule.variable, err = compilePath(variable); err != nil {
		return nil, err
	}
	for k, v := range fields {
		if k == "Variable" || k == "Next" {
			continue
		}
		if rule.op != "" {
			return nil, fmt.Errorf("rule has more than one operator")
		}
		base, isPath := strings.CutSuffix(k, "Path")
		if !comparisonOps[k] && !(isPath && comparisonOps[base] && !strings.HasPrefix(base, "Is") && base != "StringMatches") {
			return nil, fmt.Errorf("unknown comparison operator %q", k)
		}
		operand, err := decode(v)
		if err != nil {
			return nil, err
		}
		if isPath && comparisonOps[base] && !strings.HasPrefix(base, "Is") {
			s, ok := operand.(string)
			if !ok {
				return nil, fmt.Errorf("%s needs a path", k)
			}
			if rule.valuePath, err = compilePath(s); err != nil {
				return nil, err
			}
			rule.op = base
			continue
		}
		if err := checkOperand(k, operand); err != nil {
			return nil, err
		}
		rule.op, rule.value = k, operand
	}
	if rule.op == "" {
		return nil, fmt.Errorf("rule needs a comparison operator")
	}
	return rule, nil
}

func checkOperand(op string, v any) error {
	var ok bool
	switch {
	case strings.HasPrefix(op, "String"):
		_, ok = v.(string)
	case strings.HasPrefix(op, "Numeric"):
		_, ok = v.(float64)
	case strings.HasPrefix(op, "Timestamp"):
		s, isStr := v.(string)
		if isStr {
			_, err := parseTimestamp(s)
			ok = err == nil
		}
	default: // BooleanEquals and Is*
		_, ok = v.(bool)
	}
	if !ok {
		return fmt.Errorf("%s has an operand of the wrong type", op)
	}
	return nil
}
