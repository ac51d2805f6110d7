package asl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// Documents are decoded with encoding/json into any (numbers become float64), the form
// github.com/theory/jsonpath selects from.

// path is a compiled ASL path: an RFC 9535 query over the effective input ("$...") or over
// the context object ("$$...").
type path struct {
	src      string
	context  bool
	query    *jsonpath.Path
	singular bool
}

func compilePath(s string) (*path, error) {
	p := &path{src: s}
	q := s
	if strings.HasPrefix(s, "$$") {
		p.context = true
		q = s[1:]
	}
	if !strings.HasPrefix(q, "$") {
		return nil, fmt.Errorf("path %q must start with $", s)
	}
	jp, err := jsonpath.Parse(q)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", s, err)
	}
	p.query = jp
	p.singular = jp.Query().Singular() != nil
	return p, nil
}

// eval selects the path's value. A singular path that matches nothing is an error (AWS
// raises States.Runtime); a non-singular one yields the array of its matches, as in AWS.
func (p *path) eval(input, ctxObj any) (any, error) {
	doc := input
	if p.context {
		doc = ctxObj
	}
	nodes := p.query.Select(doc)
	if p.singular {
		if len(nodes) == 0 {
			return nil, runtimeErr(ErrNameRuntime, "the JSONPath %s could not be found in the input", p.src)
		}
		return nodes[0], nil
	}
	out := make([]any, 0, len(nodes))
	out = append(out, nodes...)
	return out, nil
}

// exists reports whether a path selects anything (IsPresent).
func (p *path) exists(input, ctxObj any) bool {
	doc := input
	if p.context {
		doc = ctxObj
	}
	return len(p.query.Select(doc)) > 0
}

// refPath is a ResultPath: a reference path naming one place to write, $ or $.a.b / $['a'].
type refPath struct {
	src   string
	names []string
}

func compileRefPath(s string) (*refPath, error) {
	jp, err := jsonpath.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("reference path %q: %w", s, err)
	}
	rp := &refPath{src: s}
	for _, seg := range jp.Query().Segments() {
		sels := seg.Selectors()
		name, ok := sels[0].(spec.Name)
		if seg.IsDescendant() || len(sels) != 1 || !ok {
			return nil, fmt.Errorf("reference path %q must name fields only", s)
		}
		rp.names = append(rp.names, string(name))
	}
	return rp, nil
}

// set returns input with value placed at the path. Missing objects on the way are created;
// a non-object on the way is States.ResultPathMatchFailure, as in AWS.
func (rp *refPath) set(input, value any) (any, error) {
	if len(rp.names) == 0 {
		return value, nil
	}
	root, ok := deepCopy(input).(map[string]any)
	if !ok {
		return nil, runtimeErr(ErrNameResultPathMatchFailed, "unable to apply ResultPath %s to a non-object input", rp.src)
	}
	cur := root
	for i, n := range rp.names {
		if i == len(rp.names)-1 {
			cur[n] = value
			break
		}
		next, present := cur[n]
		if !present {
			m := map[string]any{}
			cur[n] = m
			cur = m
			continue
		}
		m, isObj := next.(map[string]any)
		if !isObj {
			return nil, runtimeErr(ErrNameResultPathMatchFailed, "unable to apply ResultPath %s: %s is not an object", rp.src, n)
		}
		cur = m
	}
	return root, nil
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = deepCopy(e)
		}
		return a
	default:
		return v
	}
}

// template is a compiled payload template (Parameters, ResultSelector): fields whose name
// ends in ".$" take their value from a path or an intrinsic function.
type template struct {
	literal any                  // for non-object, non-array values
	fields  map[string]*template // object
	items   []*template          // array
	isObj   bool
	isArr   bool
	dyn     *path      // "key.$": "$.x"
	fn      *intrinsic // "key.$": "States.Format(...)"
}

func compileTemplate(v any) (*template, error) {
	switch t := v.(type) {
	case map[string]any:
		out := &template{isObj: true, fields: map[string]*template{}}
		for k, e := range t {
			if name, ok := strings.CutSuffix(k, ".$"); ok {
				s, isStr := e.(string)
				if !isStr {
					return nil, fmt.Errorf("field %q must be a path or intrinsic function string", k)
				}
				d, err := compileDynamic(s)
				if err != nil {
					return nil, fmt.Errorf("field %q: %w", k, err)
				}
				out.fields[name] = d
				continue
			}
			c, err := compileTemplate(e)
			if err != nil {
				return nil, err
			}
			out.fields[k] = c
		}
		return out, nil
	case []any:
		out := &template{isArr: true}
		for _, e := range t {
			c, err := compileTemplate(e)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, c)
		}
		return out, nil
	default:
		return &template{literal: v}, nil
	}
}

func compileDynamic(s string) (*template, error) {
	if strings.HasPrefix(s, "States.") {
		fn, err := parseIntrinsic(s)
		if err != nil {
			return nil, err
		}
		return &template{fn: fn}, nil
	}
	p, err := compilePath(s)
	if err != nil {
		return nil, err
	}
	return &template{dyn: p}, nil
}

func (t *template) eval(input, ctxObj any) (any, error) {
	switch {
	case t.dyn != nil:
		v, err := t.dyn.eval(input, ctxObj)
		if err != nil {
			return nil, runtimeErr(ErrNameRuntime, "the JSONPath %s specified for a field could not be found in the input", t.dyn.src)
		}
		return deepCopy(v), nil
	case t.fn != nil:
		return t.fn.eval(input, ctxObj)
	case t.isObj:
		m := make(map[string]any, len(t.fields))
		for k, f := range t.fields {
			v, err := f.eval(input, ctxObj)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case t.isArr:
		a := make([]any, len(t.items))
		for i, f := range t.items {
			v, err := f.eval(input, ctxObj)
			if err != nil {
				return nil, err
			}
			a[i] = v
		}
		return a, nil
	default:
		return deepCopy(t.literal), nil
	}
}

func decode(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}
