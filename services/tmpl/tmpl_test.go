package tmpl

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testEnv() map[string]any {
	return map[string]any{
		"input": map[string]any{
			"amount":   100.0,
			"name":     "ACME",
			"ok":       true,
			"tags":     []any{"a", "b"},
			"customer": map[string]any{"id": 7.0, "email": "x@example.com"},
		},
		"steps": map[string]any{
			"fetch_invoices": map[string]any{
				"output": map[string]any{"total": 12.5, "count": 3.0, "items": []any{map[string]any{"id": "inv-1"}}},
				"status": "SUCCEEDED",
			},
			"empty": map[string]any{"output": nil, "status": "SKIPPED"},
		},
		"execution": map[string]any{"id": "exec-1"},
	}
}

// decode parses a JSON literal the way step configs arrive.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func TestRenderSinglePlaceholderKeepsType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"number", "{{ steps.fetch_invoices.output.total }}", 12.5},
		{"integer literal becomes float64", "{{ 1 + 2 }}", 3.0},
		{"arithmetic", "{{ input.amount * 1.23 }}", 123.0},
		{"bool", "{{input.ok}}", true},
		{"surrounding spaces", "  {{ input.ok }}  ", true},
		{"object", "{{ input.customer }}", map[string]any{"id": 7.0, "email": "x@example.com"}},
		{"array", "{{ input.tags }}", []any{"a", "b"}},
		{"string", "{{ execution.id }}", "exec-1"},
		{"bracket notation", `{{ steps["fetch_invoices"].status }}`, "SUCCEEDED"},
		{"missing nested field is nil", "{{ steps.fetch_invoices.output.nope }}", nil},
		{"missing deeper field is nil", "{{ steps.fetch_invoices.output.nope.deeper }}", nil},
		{"field of nil output is nil", "{{ steps.empty.output.total }}", nil},
		{"map literal", `{{ {"a": {"b": 1}} }}`, map[string]any{"a": map[string]any{"b": 1.0}}},
		{"builtin", "{{ len(input.tags) }}", 2.0},
		{"array index", "{{ steps.fetch_invoices.output.items[0].id }}", "inv-1"},
		{"ternary", "{{ input.amount > 50 ? 'big' : 'small' }}", "big"},
		{"no placeholder", "plain", "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.in, testEnv())
			if err != nil {
				t.Fatalf("Render(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Render(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRenderInterpolation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{"Total: {{ steps.fetch_invoices.output.total }} EUR", "Total: 12.5 EUR"},
		{"{{ steps.fetch_invoices.output.count }} invoices", "3 invoices"},
		{"{{ input.name }}-{{ execution.id }}", "ACME-exec-1"},
		{"gross {{ input.amount * 1.23 }}", "gross 123"},
		{"c={{ input.customer }}", `c={"email":"x@example.com","id":7}`},
		{"tags={{ input.tags }}", `tags=["a","b"]`},
		{"missing=[{{ input.nope }}]", "missing=[]"},
		{"ok={{ input.ok }}", "ok=true"},
		{"html={{ '<b>&' }}", "html=<b>&"},
		{"braces { } stay", "braces { } stay"},
		{"quoted }} inside: {{ '}}' }}!", "quoted }} inside: }}!"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.in, testEnv())
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render(%q) = %#v, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRenderNested(t *testing.T) {
	t.Parallel()
	in := decode(t, `{
		"url": "https://api.example.com/invoices/{{ execution.id }}",
		"{{ not.a.key }}": "keys are not templated",
		"body": {"amount": "{{ steps.fetch_invoices.output.total }}", "lines": ["{{ input.tags }}", 1, null, true, "x {{ input.name }}"]}
	}`)
	before, _ := json.Marshal(in)

	got, err := Render(in, testEnv())
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	want := map[string]any{
		"url":             "https://api.example.com/invoices/exec-1",
		"{{ not.a.key }}": "keys are not templated",
		"body": map[string]any{
			"amount": 12.5,
			"lines":  []any{[]any{"a", "b"}, 1.0, nil, true, "x ACME"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Render = %#v\nwant %#v", got, want)
	}
	after, _ := json.Marshal(in)
	if string(before) != string(after) {
		t.Errorf("input mutated:\n%s\n%s", before, after)
	}
}

func TestRenderString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"{{ steps.fetch_invoices.output.total }}", "12.5"},
		{"{{ input.customer }}", `{"email":"x@example.com","id":7}`},
		{"{{ input.nope }}", ""},
		{"id {{ execution.id }}", "id exec-1"},
		{"{{ 3.0 }}", "3"},
	}
	for _, tt := range tests {
		got, err := RenderString(tt.in, testEnv())
		if err != nil {
			t.Fatalf("RenderString(%q): %v", tt.in, err)
		}
		if got != tt.want {
			t.Errorf("RenderString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string // JSON
		wantExpr string
		wantPath string
		wantMsg  string
		unknown  bool
	}{
		{"syntax error", `{"body": {"amount": "{{ input.amount * }}"}}`, "input.amount *", "body.amount", "unexpected token", false},
		{"missing step", `{"body": {"amount": "{{ steps.x.output.total }}"}}`, "steps.x.output.total", "body.amount", `unknown step "x"`, true},
		{"missing step bracket", `{"a": ["ok", "n={{ steps['later'].output }}"]}`, "steps['later'].output", "a[1]", `unknown step "later"`, true},
		{"unknown top-level name", `{"x": "{{ inptu.amount }}"}`, "inptu.amount", "x", "unknown name inptu", false},
		{"unclosed", `{"x": "{{ input.amount"}`, "{{ input.amount", "x", "unclosed", false},
		{"empty", `{"x": "a {{ }} b"}`, "a {{ }} b", "x", "empty placeholder", false},
		{"index out of range", `{"x": "{{ input.tags[5] }}"}`, "input.tags[5]", "x", "index out of range", false},
		{"infinity", `{"x": "{{ 1 / 0 }}"}`, "1 / 0", "x", "no JSON form", false},
		{"root string", `"{{ steps.nope }}"`, "steps.nope", "", `unknown step "nope"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(decode(t, tt.in), testEnv())
			if err == nil {
				t.Fatalf("Render = %#v, want error", got)
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if te.Expr != tt.wantExpr || te.Path != tt.wantPath {
				t.Errorf("Expr, Path = %q, %q; want %q, %q", te.Expr, te.Path, tt.wantExpr, tt.wantPath)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("message %q does not contain %q", err.Error(), tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message is not one line: %q", err.Error())
			}
			if errors.Is(err, ErrUnknownStep) != tt.unknown {
				t.Errorf("errors.Is(ErrUnknownStep) = %v, want %v", !tt.unknown, tt.unknown)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Render(map[string]any{"body": map[string]any{"amount": "{{ steps.x.output.total }}"}}, testEnv())
	want := `template "steps.x.output.total" at body.amount: unknown step "x"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestRenderNilEnvAndNoSteps(t *testing.T) {
	t.Parallel()
	if _, err := Render("{{ steps.a }}", nil); !errors.Is(err, ErrUnknownStep) {
		t.Errorf("nil env: err = %v, want ErrUnknownStep", err)
	}
	got, err := Render("{{ 2 * 2 }}", nil)
	if err != nil || got != 4.0 {
		t.Errorf("nil env constant = %v, %v", got, err)
	}
}

func TestRenderCacheAcrossEnvShapes(t *testing.T) {
	t.Parallel()
	// The same expression compiled for one set of names must still reject
	// an unknown name in an environment with fewer names.
	if _, err := Render("{{ extra }}", map[string]any{"extra": 1.0}); err != nil {
		t.Fatalf("with extra: %v", err)
	}
	if _, err := Render("{{ extra }}", map[string]any{"input": 1.0}); err == nil {
		t.Fatal("without extra: want unknown name error")
	}
	// Different value types under the same names share a program.
	for _, in := range []any{2.0, map[string]any{"v": 1.0}, "s"} {
		if _, err := Render("{{ input }}", map[string]any{"input": in}); err != nil {
			t.Errorf("input %v: %v", in, err)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	in := decode(t, `{
		"url": "https://x/{{ steps.fetch.output.id }}/{{ execution.id }}",
		"body": {
			"a": "{{ steps['approve'].status == 'SUCCEEDED' ? steps.fetch.output.total : 0 }}",
			"b": ["{{ $env.steps.audit.output }}", "{{ input.amount + }}"],
			"c": "{{ steps[input.name] }}",
			"d": "{{ oops",
			"e": "{{ 1 + }} and {{ ) }}"
		},
		"plain": "no placeholders"
	}`)
	refs, errs := Check(in)
	wantRefs := []Ref{
		{Path: "body.a", Expr: "steps['approve'].status == 'SUCCEEDED' ? steps.fetch.output.total : 0", StepID: "approve"},
		{Path: "body.a", Expr: "steps['approve'].status == 'SUCCEEDED' ? steps.fetch.output.total : 0", StepID: "fetch"},
		{Path: "body.b[0]", Expr: "$env.steps.audit.output", StepID: "audit"},
		{Path: "url", Expr: "steps.fetch.output.id", StepID: "fetch"},
	}
	if !reflect.DeepEqual(refs, wantRefs) {
		t.Errorf("refs = %#v\nwant %#v", refs, wantRefs)
	}
	wantErrPaths := []string{"body.b[1]", "body.d", "body.e"}
	if len(errs) != len(wantErrPaths) {
		t.Errorf("errs = %v, want paths %v", errs, wantErrPaths)
	}
	for _, p := range wantErrPaths {
		if errs[p] == "" {
			t.Errorf("no error for %s (errs %v)", p, errs)
		}
	}
	if !strings.Contains(errs["body.b[1]"], `template "input.amount +" at body.b[1]`) {
		t.Errorf("errs[body.b[1]] = %q", errs["body.b[1]"])
	}
	if strings.Count(errs["body.e"], "template ") != 2 {
		t.Errorf("errs[body.e] should hold both failures: %q", errs["body.e"])
	}

	if refs, errs := Check(decode(t, `{"a": "{{ input.x }}", "b": [1, null]}`)); refs != nil || errs != nil {
		t.Errorf("Check(clean) = %v, %v; want nil, nil", refs, errs)
	}
}

func TestConcurrentRender(t *testing.T) {
	t.Parallel()
	done := make(chan error)
	for range 8 {
		go func() {
			_, err := Render(decode(t, `{"a": "{{ steps.fetch_invoices.output.total * 2 }}"}`), testEnv())
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestCheckNames(t *testing.T) {
	t.Parallel()
	names := []string{"execution", "input", "steps"}
	for _, src := range []string{"{{ env.HOME }}", "{{ $env.HOME }}", `{{ $env["PATH"] }}`, "{{ $env[input.k] }}", "x {{ HOME }}", "{{ os }}"} {
		_, errs := Check(src, names...)
		if !strings.Contains(errs[""], "unknown name") || !strings.Contains(errs[""], "input, steps") {
			t.Errorf("Check(%q) = %v, want an unknown-name error listing the allowed names", src, errs)
		}
		if _, errs := Check(src); strings.HasPrefix(src, "{{ $env") && errs != nil {
			t.Errorf("Check(%q) without names = %v, want no error", src, errs)
		}
	}
	for _, src := range []string{"{{ input.a }}", "{{ execution.id }}", "{{ $env.input.a }}", "{{ steps.a.output }}", "{{ len(input.xs ?? []) }}",
		"{{ map(input.xs ?? [], # * 2) }}", "{{ let v = input.a; v + 1 }}", "{{ filter(input.xs ?? [], .ok) }}", "{{ $env }}"} {
		if _, errs := Check(src, names...); errs != nil {
			t.Errorf("Check(%q) = %v, want nil", src, errs)
		}
	}
}
