package asl

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// intrinsic is a parsed intrinsic function call such as States.Format('{}', $.x).
type intrinsic struct {
	name string
	args []intrinsicArg
}

type intrinsicArg struct {
	rawString *string // a quoted literal, escapes kept so Format can tell \{ from {
	literal   any     // number, true, false, null
	path      *path
	call      *intrinsic
}

var intrinsicArity = map[string][2]int{ // min, max (-1: unbounded)
	"States.Format":        {1, -1},
	"States.StringToJson":  {1, 1},
	"States.JsonToString":  {1, 1},
	"States.MathAdd":       {2, 2},
	"States.Array":         {0, -1},
	"States.ArrayLength":   {1, 1},
	"States.ArrayGetItem":  {2, 2},
	"States.ArrayContains": {2, 2},
}

func parseIntrinsic(s string) (*intrinsic, error) {
	p := &intrinsicParser{src: s}
	call, err := p.call()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.src) {
		return nil, fmt.Errorf("intrinsic %q: trailing text at %d", s, p.pos)
	}
	return call, nil
}

type intrinsicParser struct {
	src string
	pos int
}

func (p *intrinsicParser) space() {
	for p.pos < len(p.src) && p.src[p.pos] == ' ' {
		p.pos++
	}
}

func (p *intrinsicParser) call() (*intrinsic, error) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] != '(' {
		p.pos++
	}
	name := strings.TrimSpace(p.src[start:p.pos])
	arity, known := intrinsicArity[name]
	if !known {
		return nil, fmt.Errorf("unknown intrinsic function %q", name)
	}
	if p.pos == len(p.src) {
		return nil, fmt.Errorf("intrinsic %s: missing (", name)
	}
	p.pos++ // (
	fn := &intrinsic{name: name}
	p.space()
	if p.pos < len(p.src) && p.src[p.pos] == ')' {
		p.pos++
	} else {
		for {
			p.space()
			arg, err := p.arg()
			if err != nil {
				return nil, fmt.Errorf("intrinsic %s: %w", name, err)
			}
			fn.args = append(fn.args, arg)
			p.space()
			if p.pos >= len(p.src) {
				return nil, fmt.Errorf("intrinsic %s: missing )", name)
			}
			c := p.src[p.pos]
			p.pos++
			if c == ')' {
				break
			}
			if c != ',' {
				return nil, fmt.Errorf("intrinsic %s: unexpected %q", name, c)
			}
		}
	}
	if len(fn.args) < arity[0] || (arity[1] >= 0 && len(fn.args) > arity[1]) {
		return nil, fmt.Errorf("intrinsic %s: wrong number of arguments (%d)", name, len(fn.args))
	}
	return fn, nil
}

func (p *intrinsicParser) arg() (intrinsicArg, error) {
	if p.pos >= len(p.src) {
		return intrinsicArg{}, fmt.Errorf("missing argument")
	}
	rest := p.src[p.pos:]
	switch {
	case rest[0] == '\'':
		var b strings.Builder
		p.pos++
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			if c == '\\' && p.pos+1 < len(p.src) {
				b.WriteByte(c)
				b.WriteByte(p.src[p.pos+1])
				p.pos += 2
				continue
			}
			if c == '\'' {
				p.pos++
				s := b.String()
				return intrinsicArg{rawString: &s}, nil
			}
			b.WriteByte(c)
			p.pos++
		}
		return intrinsicArg{}, fmt.Errorf("unterminated string")
	case rest[0] == '$':
		end := p.pathEnd()
		pt, err := compilePath(strings.TrimSpace(p.src[p.pos:end]))
		if err != nil {
			return intrinsicArg{}, err
		}
		p.pos = end
		return intrinsicArg{path: pt}, nil
	case strings.HasPrefix(rest, "States."):
		c, err := p.call()
		if err != nil {
			return intrinsicArg{}, err
		}
		return intrinsicArg{call: c}, nil
	default:
		end := p.pos
		for end < len(p.src) && p.src[end] != ',' && p.src[end] != ')' {
			end++
		}
		tok := strings.TrimSpace(p.src[p.pos:end])
		p.pos = end
		switch tok {
		case "true":
			return intrinsicArg{literal: true}, nil
		case "false":
			return intrinsicArg{literal: false}, nil
		case "null":
			return intrinsicArg{literal: nil}, nil
		}
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return intrinsicArg{}, fmt.Errorf("bad argument %q", tok)
		}
		return intrinsicArg{literal: f}, nil
	}
}

// pathEnd finds where a path argument stops: the first , or ) outside brackets and quotes.
func (p *intrinsicParser) pathEnd() int {
	depth := 0
	var quote byte
	for i := p.pos; i < len(p.src); i++ {
		c := p.src[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '[' || c == '(':
			depth++
		case c == ']' || (c == ')' && depth > 0):
			depth--
		case depth == 0 && (c == ',' || c == ')'):
			return i
		}
	}
	return len(p.src)
}

func unescapeIntrinsic(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (a intrinsicArg) value(input, ctxObj any) (any, error) {
	switch {
	case a.rawString != nil:
		return unescapeIntrinsic(*a.rawString), nil
	case a.path != nil:
		v, err := a.path.eval(input, ctxObj)
		if err != nil {
			return nil, runtimeErr(ErrNameRuntime, "intrinsic argument %s: %v", a.path.src, err)
		}
		return v, nil
	case a.call != nil:
		return a.call.eval(input, ctxObj)
	default:
		return a.literal, nil
	}
}

func intrinsicErr(name, format string, args ...any) error {
	return runtimeErr(ErrNameIntrinsicFailure, name+": "+format, args...)
}

func (f *intrinsic) eval(input, ctxObj any) (any, error) {
	vals := make([]any, len(f.args))
	for i, a := range f.args {
		v, err := a.value(input, ctxObj)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	switch f.name {
	case "States.Format":
		if f.args[0].rawString == nil {
			return nil, intrinsicErr(f.name, "the template must be a string literal")
		}
		return formatIntrinsic(*f.args[0].rawString, vals[1:])
	case "States.StringToJson":
		s, ok := vals[0].(string)
		if !ok {
			return nil, intrinsicErr(f.name, "argument must be a string")
		}
		v, err := decode([]byte(s))
		if err != nil {
			return nil, intrinsicErr(f.name, "argument is not JSON")
		}
		return v, nil
	case "States.JsonToString":
		b, err := json.Marshal(vals[0])
		if err != nil {
			return nil, intrinsicErr(f.name, "%v", err)
		}
		return string(b), nil
	case "States.MathAdd":
		a, okA := vals[0].(float64)
		b, okB := vals[1].(float64)
		if !okA || !okB || a != math.Trunc(a) || b != math.Trunc(b) {
			return nil, intrinsicErr(f.name, "arguments must be integers")
		}
		return a + b, nil
	case "States.Array":
		return vals, nil
	case "States.ArrayLength":
		arr, ok := vals[0].([]any)
		if !ok {
			return nil, intrinsicErr(f.name, "argument must be an array")
		}
		return float64(len(arr)), nil
	case "States.ArrayGetItem":
		arr, ok := vals[0].([]any)
		idx, okI := vals[1].(float64)
		if !ok || !okI || idx != math.Trunc(idx) || idx < 0 || int(idx) >= len(arr) {
			return nil, intrinsicErr(f.name, "bad array or index")
		}
		return arr[int(idx)], nil
	case "States.ArrayContains":
		arr, ok := vals[0].([]any)
		if !ok {
			return nil, intrinsicErr(f.name, "first argument must be an array")
		}
		want, _ := json.Marshal(vals[1])
		for _, e := range arr {
			if got, _ := json.Marshal(e); string(got) == string(want) {
				return true, nil
			}
		}
		return false, nil
	}
	return nil, intrinsicErr(f.name, "not supported")
}

func formatIntrinsic(tmpl string, args []any) (any, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c == '\\' && i+1 < len(tmpl) {
			i++
			b.WriteByte(tmpl[i])
			continue
		}
		if c == '{' && i+1 < len(tmpl) && tmpl[i+1] == '}' {
			if next >= len(args) {
				return nil, intrinsicErr("States.Format", "more {} than arguments")
			}
			switch v := args[next].(type) {
			case string:
				b.WriteString(v)
			case map[string]any, []any:
				return nil, intrinsicErr("States.Format", "arguments must be strings, numbers, booleans or null")
			default:
				enc, _ := json.Marshal(v)
				b.Write(enc)
			}
			next++
			i++
			continue
		}
		b.WriteByte(c)
	}
	if next != len(args) {
		return nil, intrinsicErr("States.Format", "%d arguments for %d {}", len(args), next)
	}
	return b.String(), nil
}
