package asl

import (
	"strings"
	"time"
)

// parseTimestamp accepts the RFC 3339 timestamps the States Language compares.
func parseTimestamp(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

// match evaluates a rule. A Variable that is absent is States.Runtime, except under
// IsPresent; an operand of another type than the operator's compares false, as in AWS.
func (r *ChoiceRule) match(input, ctxObj any) (bool, error) {
	switch {
	case r.and != nil:
		for _, c := range r.and {
			ok, err := c.match(input, ctxObj)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case r.or != nil:
		for _, c := range r.or {
			ok, err := c.match(input, ctxObj)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case r.not != nil:
		ok, err := r.not.match(input, ctxObj)
		return !ok && err == nil, err
	}
	if r.op == "IsPresent" {
		return r.variable.exists(input, ctxObj) == r.value.(bool), nil
	}
	v, err := r.variable.eval(input, ctxObj)
	if err != nil {
		return false, runtimeErr(ErrNameRuntime, "invalid path %s: the choice state's condition path references an invalid value", r.variable.src)
	}
	operand := r.value
	if r.valuePath != nil {
		if operand, err = r.valuePath.eval(input, ctxObj); err != nil {
			return false, runtimeErr(ErrNameRuntime, "invalid path %s in %sPath", r.valuePath.src, r.op)
		}
	}
	return compare(r.op, v, operand), nil
}

func compare(op string, v, operand any) bool {
	switch op {
	case "IsNull":
		return (v == nil) == operand.(bool)
	case "IsString":
		_, ok := v.(string)
		return ok == operand.(bool)
	case "IsNumeric":
		_, ok := v.(float64)
		return ok == operand.(bool)
	case "IsBoolean":
		_, ok := v.(bool)
		return ok == operand.(bool)
	case "IsTimestamp":
		s, ok := v.(string)
		if ok {
			_, err := parseTimestamp(s)
			ok = err == nil
		}
		return ok == operand.(bool)
	case "BooleanEquals":
		a, okA := v.(bool)
		b, okB := operand.(bool)
		return okA && okB && a == b
	case "StringMatches":
		a, okA := v.(string)
		b, okB := operand.(string)
		return okA && okB && wildcardMatch(b, a)
	}
	var c int
	switch {
	case strings.HasPrefix(op, "String"):
		a, okA := v.(string)
		b, okB := operand.(string)
		if !okA || !okB {
			return false
		}
		c = strings.Compare(a, b)
	case strings.HasPrefix(op, "Numeric"):
		a, okA := v.(float64)
		b, okB := operand.(float64)
		if !okA || !okB {
			return false
		}
		c = cmpFloat(a, b)
	case strings.HasPrefix(op, "Timestamp"):
		a, okA := v.(string)
		b, okB := operand.(string)
		if !okA || !okB {
			return false
		}
		ta, errA := parseTimestamp(a)
		tb, errB := parseTimestamp(b)
		if errA != nil || errB != nil {
			return false
		}
		c = ta.Compare(tb)
	default:
		return false
	}
	switch {
	case strings.HasSuffix(op, "LessThanEquals"):
		return c <= 0
	case strings.HasSuffix(op, "GreaterThanEquals"):
		return c >= 0
	case strings.HasSuffix(op, "LessThan"):
		return c < 0
	case strings.HasSuffix(op, "GreaterThan"):
		return c > 0
	case strings.HasSuffix(op, "Equals"):
		return c == 0
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wildcardMatch implements StringMatches: * matches any run of characters, \* and \\ are
// literal.
func wildcardMatch(pattern, s string) bool {
	type tok struct {
		star bool
		ch   byte
	}
	var toks []tok
	for i := 0; i < len(pattern); i++ {
		switch {
		case pattern[i] == '\\' && i+1 < len(pattern):
			i++
			toks = append(toks, tok{ch: pattern[i]})
		case pattern[i] == '*':
			toks = append(toks, tok{star: true})
		default:
			toks = append(toks, tok{ch: pattern[i]})
		}
	}
	// Classic greedy matcher with backtracking to the last star.
	ti, si, starT, starS := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case ti < len(toks) && !toks[ti].star && toks[ti].ch == s[si]:
			ti++
			si++
		case ti < len(toks) && toks[ti].star:
			starT, starS = ti, si
			ti++
		case starT >= 0:
			starS++
			si = starS
			ti = starT + 1
		default:
			return false
		}
	}
	for ti < len(toks) && toks[ti].star {
		ti++
	}
	return ti == len(toks)
}
