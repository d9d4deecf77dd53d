// Package tmpl evaluates `{{ expr }}` placeholders inside workflow step
// configurations. Expressions are github.com/expr-lang/expr programs run
// against an environment such as
//
//	{"input": {...}, "steps": {"fetch": {"output": {...}, "status": "SUCCEEDED"}}, "execution": {"id": "..."}}
//
// The contract:
//
//   - [Render] walks a value decoded from JSON (map[string]any, []any, string,
//     float64, bool, nil) and returns a new value; the input is never
//     modified. Map keys are not templated. Values of other Go types are
//     returned as they are.
//   - A string that is exactly one placeholder (ignoring surrounding spaces)
//     is replaced by the expression's result with its JSON type kept (number,
//     object, array, bool, string or nil). Results are normalised to the kinds
//     encoding/json produces when decoding into any: integers become float64,
//     other Go values (time.Time, structs…) go through a JSON round trip.
//   - In any other string each result is formatted into the text: strings as
//     they are, nil as the empty string, numbers without trailing zeros (12.5,
//     3), objects and arrays as compact JSON.
//   - A top-level name that is not in the environment (`{{ inptu.x }}`) and a
//     reference to a step that is not in env["steps"] (`steps.nope`,
//     `steps["nope"]`) are errors; the latter wraps [ErrUnknownStep]. Below
//     that, member access is nil-safe: a missing field at any depth evaluates
//     to nil (JSON null, or "" inside a longer string). Indexing past the end
//     of an array is still an error.
//   - Every failure is an [*Error] carrying the expression and the JSON path
//     of the string it came from ("body.amount", "items[2].name", "" for the
//     root). Render stops at the first failure, visiting object keys in
//     sorted order.
//   - "{{" without a closing "}}" and an empty placeholder are syntax errors;
//     there is no escape for a literal "{{".
//   - NaN and ±Inf results are errors, because they have no JSON form.
//
// [Check] validates every placeholder without an environment, only against the
// top-level names the environment will have (when given: a name outside them,
// such as env.HOME, is an error), and reports the step ids referenced as
// steps.<id> or steps["<id>"], so callers can reject references to unknown or
// later steps when a workflow is saved.
//
// Compiled programs are cached per expression and set of environment names
// for the life of the process; all functions are safe for concurrent use.
// The package imports nothing from Lifeline.
package tmpl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
)

// ErrUnknownStep is wrapped by the [*Error] returned when an expression
// references steps.<id> and env["steps"] has no entry <id>.
var ErrUnknownStep = errors.New("unknown step")

// Error is the failure of one placeholder. Expr is the expression between the
// braces (trimmed), Path the JSON path of the string holding it, Err the cause
// (an expr compile or runtime error, [ErrUnknownStep], a placeholder syntax
// error or a result that has no JSON form).
type Error struct {
	Expr string
	Path string
	Err  error
}

// Error returns a one-line message like
// `template "steps.x.output.total" at body.amount: unknown step "x"`.
// expr's multi-line source snippets are left out; they remain in Err.
func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg, _, _ = strings.Cut(e.Err.Error(), "\n")
	}
	if e.Path == "" {
		return fmt.Sprintf("template %q: %s", e.Expr, msg)
	}
	return fmt.Sprintf("template %q at %s: %s", e.Expr, e.Path, msg)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Ref is one step reference found by [Check]: the JSON path of the string,
// the expression, and the referenced step id.
type Ref struct {
	Path   string
	Expr   string
	StepID string
}

// Render returns a copy of v with the placeholders of every string evaluated
// against env (see the package documentation for typing and formatting). On
// failure it returns nil and an [*Error].
func Render(v any, env map[string]any) (any, error) {
	return render(v, env, "")
}

// RenderString evaluates the placeholders in s and always returns a string:
// a single placeholder's result is formatted like an interpolated one. On
// failure it returns "" and an [*Error] with an empty Path.
func RenderString(s string, env map[string]any) (string, error) {
	segs, err := split(s)
	if err != nil {
		return "", &Error{Expr: s, Err: err}
	}
	return interpolate(segs, env, "")
}

// Check compiles every placeholder in v without an environment. When names are
// given they are the only top-level names an expression may use (besides
// expr's builtins and its own variables): any other name, like env in
// `{{ env.HOME }}`, is an error naming the allowed ones; with no names every
// name is accepted. errs maps the JSON path of each string with invalid
// placeholders to a message (several messages for one string are joined with
// "; "); it is nil when all compile. refs lists, in walk order (object keys
// sorted), each distinct step id each expression references as steps.<id> or
// steps["<id>"] (also via $env). Dynamic references such as steps[name] cannot
// be resolved and are not listed.
func Check(v any, names ...string) (refs []Ref, errs map[string]string) {
	opts := []expr.Option{expr.Patch(nilSafe{})}
	if len(names) > 0 {
		shape := make(types.Map, len(names))
		for _, n := range names {
			shape[n] = types.Any
		}
		opts = append(opts, expr.Env(shape))
	}
	walkStrings(v, "", func(path, s string) {
		segs, err := split(s)
		if err != nil {
			addErr(&errs, path, (&Error{Expr: s, Path: path, Err: err}).Error())
			return
		}
		for _, seg := range segs {
			if !seg.isExpr {
				continue
			}
			ids, err := stepRefs(seg.text)
			if err == nil {
				_, err = expr.Compile(seg.text, opts...)
				if err == nil && len(names) > 0 {
					err = envNames(seg.text, names)
				}
				if err != nil && len(names) > 0 && strings.HasPrefix(err.Error(), "unknown name ") {
					msg, _, _ := strings.Cut(err.Error(), "\n")
					err = fmt.Errorf("%s; templates can use only %s", msg, strings.Join(names, ", "))
				}
			}
			if err != nil {
				addErr(&errs, path, (&Error{Expr: seg.text, Path: path, Err: err}).Error())
				continue
			}
			for _, id := range ids {
				refs = append(refs, Ref{Path: path, Expr: seg.text, StepID: id})
			}
		}
	})
	return refs, errs
}

func addErr(errs *map[string]string, path, msg string) {
	if *errs == nil {
		*errs = map[string]string{}
	}
	if prev, ok := (*errs)[path]; ok {
		msg = prev + "; " + msg
	}
	(*errs)[path] = msg
}

// walkStrings calls fn for every string in v, visiting object keys in sorted
// order.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch v := v.(type) {
	case string:
		fn(path, v)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkStrings(v[k], joinKey(path, k), fn)
		}
	case []any:
		for i, e := range v {
			walkStrings(e, joinIndex(path, i), fn)
		}
	}
}

func render(v any, env map[string]any, path string) (any, error) {
	switch v := v.(type) {
	case string:
		return renderValue(v, env, path)
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			r, err := render(v[k], env, joinKey(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := render(e, env, joinIndex(path, i))
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

func renderValue(s string, env map[string]any, path string) (any, error) {
	segs, err := split(s)
	if err != nil {
		return nil, &Error{Expr: s, Path: path, Err: err}
	}
	if single, ok := singleExpr(segs); ok {
		out, err := eval(single, env)
		if err == nil {
			out, err = normalize(out)
		}
		if err != nil {
			return nil, &Error{Expr: single, Path: path, Err: err}
		}
		return out, nil
	}
	return interpolate(segs, env, path)
}

func interpolate(segs []segment, env map[string]any, path string) (string, error) {
	var b strings.Builder
	for _, seg := range segs {
		if !seg.isExpr {
			b.WriteString(seg.text)
			continue
		}
		out, err := eval(seg.text, env)
		if err == nil {
			out, err = normalize(out)
		}
		if err == nil {
			err = format(&b, out)
		}
		if err != nil {
			return "", &Error{Expr: seg.text, Path: path, Err: err}
		}
	}
	return b.String(), nil
}

// singleExpr reports whether segs are one placeholder with at most
// whitespace around it.
func singleExpr(segs []segment) (string, bool) {
	expr, n := "", 0
	for _, seg := range segs {
		switch {
		case seg.isExpr:
			expr, n = seg.text, n+1
		case strings.TrimSpace(seg.text) != "":
			return "", false
		}
	}
	return expr, n == 1
}

type segment struct {
	text   string
	isExpr bool
}

// split cuts s into literal text and trimmed placeholder expressions. The end
// of a placeholder is the first "}}" outside string literals and outside
// braces opened inside the expression, so map literals work.
func split(s string) ([]segment, error) {
	var segs []segment
	for {
		start := strings.Index(s, "{{")
		if start < 0 {
			if s != "" {
				segs = append(segs, segment{text: s})
			}
			return segs, nil
		}
		if start > 0 {
			segs = append(segs, segment{text: s[:start]})
		}
		end := closing(s, start+2)
		if end < 0 {
			return nil, errors.New(`unclosed "{{"`)
		}
		e := strings.TrimSpace(s[start+2 : end])
		if e == "" {
			return nil, errors.New("empty placeholder")
		}
		segs = append(segs, segment{text: e, isExpr: true})
		s = s[end+2:]
	}
}

// closing returns the index of the "}}" ending the placeholder whose body
// starts at i, or -1.
func closing(s string, i int) int {
	depth := 0
	var quote byte
	for ; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote != '`':
				i++
			case c == quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'', '`':
			quote = c
		case '{':
			depth++
		case '}':
			if depth == 0 && i+1 < len(s) && s[i+1] == '}' {
				return i
			}
			if depth > 0 {
				depth--
			}
		}
	}
	return -1
}

// program is a cached compilation: the bytecode and the static step ids.
type program struct {
	prog  *vm.Program
	steps []string
}

// cache maps envSignature + "\x00" + expression to *program. Unbounded: the
// set of expressions is the set written into workflow definitions.
var cache sync.Map

func eval(src string, env map[string]any) (any, error) {
	if env == nil {
		env = map[string]any{}
	}
	p, err := compile(src, env)
	if err != nil {
		// Prefer naming the missing step over "unknown name steps" when the
		// environment has no steps at all.
		if ids, perr := stepRefs(src); perr == nil {
			if err := checkSteps(ids, env); err != nil {
				return nil, err
			}
		}
		return nil, err
	}
	if err := checkSteps(p.steps, env); err != nil {
		return nil, err
	}
	return expr.Run(p.prog, env)
}

func checkSteps(ids []string, env map[string]any) error {
	for _, id := range ids {
		if !hasStep(env["steps"], id) {
			return fmt.Errorf("%w %q", ErrUnknownStep, id)
		}
	}
	return nil
}

func compile(src string, env map[string]any) (*program, error) {
	names := slices.Sorted(maps.Keys(env))
	key := strings.Join(names, ",") + "\x00" + src
	if p, ok := cache.Load(key); ok {
		return p.(*program), nil
	}
	ids, err := stepRefs(src)
	if err != nil {
		return nil, err
	}
	// Only the names are fixed at compile time; every value is typed any,
	// so one program serves every environment with the same names.
	shape := make(types.Map, len(names))
	for _, n := range names {
		shape[n] = types.Any
	}
	prog, err := expr.Compile(src, expr.Env(shape), expr.Patch(nilSafe{}))
	if err != nil {
		return nil, err
	}
	p := &program{prog: prog, steps: ids}
	cache.Store(key, p)
	return p, nil
}

func hasStep(steps any, id string) bool {
	if m, ok := steps.(map[string]any); ok {
		_, ok := m[id]
		return ok
	}
	v := reflect.ValueOf(steps)
	if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.String {
		return false
	}
	return v.MapIndex(reflect.ValueOf(id).Convert(v.Type().Key())).IsValid()
}

// nilSafe turns every member access a.b / a[i] into its optional form
// a?.b / a?.[i], so a missing field at any depth yields nil instead of
// "cannot fetch b from <nil>". Method-call callees keep plain access.
type nilSafe struct{}

func (nilSafe) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		n.Optional = true
		ast.Patch(node, &ast.ChainNode{Node: n})
	case *ast.CallNode:
		if c, ok := n.Callee.(*ast.ChainNode); ok {
			if m, ok := c.Node.(*ast.MemberNode); ok {
				m.Optional = false
				n.Callee = m
			}
		}
	}
}

// stepRefs parses src and returns the distinct step ids it names statically,
// in order of appearance.
func stepRefs(src string) ([]string, error) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, err
	}
	c := &refCollector{}
	ast.Walk(&tree.Node, c)
	return c.ids, nil
}

// envNames returns an "unknown name" error when src reads a name outside names through
// $env ($env.HOME, $env["HOME"]), which compiling against the names does not catch.
func envNames(src string, names []string) error {
	tree, err := parser.Parse(src)
	if err != nil {
		return err
	}
	c := &envCollector{names: names}
	ast.Walk(&tree.Node, c)
	return c.err
}

type envCollector struct {
	names []string
	err   error
}

func (c *envCollector) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || c.err != nil {
		return
	}
	if id, ok := m.Node.(*ast.IdentifierNode); !ok || id.Value != "$env" {
		return
	}
	if s, ok := m.Property.(*ast.StringNode); !ok || !slices.Contains(c.names, s.Value) {
		name := "(computed)"
		if ok {
			name = s.Value
		}
		c.err = fmt.Errorf("unknown name %s", name)
	}
}

type refCollector struct{ ids []string }

func (c *refCollector) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || !isStepsRoot(m.Node) {
		return
	}
	if s, ok := m.Property.(*ast.StringNode); ok && !slices.Contains(c.ids, s.Value) {
		c.ids = append(c.ids, s.Value)
	}
}

// isStepsRoot reports whether n is `steps` or `$env.steps` / `$env["steps"]`.
func isStepsRoot(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return n.Value == "steps"
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		prop, ok2 := n.Property.(*ast.StringNode)
		return ok && ok2 && id.Value == "$env" && prop.Value == "steps"
	}
	return false
}

// normalize converts an expression result to the kinds encoding/json
// produces when decoding into any.
func normalize(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, json.Number:
		return v, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("result %v has no JSON form", v)
		}
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return normalize(rv.Float())
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("result of type %T has no JSON form: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("result of type %T has no JSON form: %w", v, err)
	}
	return out, nil
}

// format writes a normalized value into a string.
func format(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
	case string:
		b.WriteString(v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
	case json.Number:
		b.WriteString(v.String())
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	return nil
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
