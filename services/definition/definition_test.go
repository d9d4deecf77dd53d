package definition_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"lifeline/models/apperr"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

func TestParse(t *testing.T) {
	reg := steps.Builtins(http.DefaultClient)
	step := func(extra string) string {
		return `{"id": "a", "type": "http", "config": {"url": "https://x.example/a"}` + extra + `}`
	}
	cases := []struct {
		name string
		def  string
		want map[string]string // field → substring of its message; nil = valid
	}{
		{"valid", `{"name": "VAT", "steps": [` + step(``) + `, {"id": "b", "type": "transform", "config": {"output": {"t": "{{ steps.a.output.total }}"}}}]}`, nil},
		{"valid with policies", `{"name": "VAT", "settings": {"retryPolicy": {"maxRetries": 5}, "unknownErrors": "no_retry"}, "steps": [` + step(`, "retryPolicy": {"backoffType": "fixed"}, "timeoutMs": 5000`) + `]}`, nil},
		{"no name", `{"steps": [` + step(``) + `]}`, map[string]string{"name": "required"}},
		{"no steps", `{"name": "x", "steps": []}`, map[string]string{"steps": "at least one"}},
		{"unknown type", `{"name": "x", "steps": [{"id": "a", "type": "ftp", "config": {}}]}`, map[string]string{"steps[0].type": `unknown step type "ftp"`}},
		{"duplicate ids", `{"name": "x", "steps": [` + step(``) + `,` + step(``) + `]}`, map[string]string{"steps[1].id": "duplicates"}},
		{"bad id", `{"name": "x", "steps": [{"id": "a b", "type": "delay", "config": {"ms": 5}}]}`, map[string]string{"steps[0].id": "letters"}},
		{"unknown step in template", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ steps.nope.output }}"}}]}`, map[string]string{"steps[0].config.output": `unknown step "nope"`}},
		{"later step in template", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ steps.b.output }}"}}, {"id": "b", "type": "delay", "config": {"ms": 1}}]}`, map[string]string{"steps[0].config.output": "runs later"}},
		{"self reference", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ steps.a.output }}"}}]}`, map[string]string{"steps[0].config.output": "runs later"}},
		{"template syntax", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"v": "{{ input. }}"}}}]}`, map[string]string{"steps[0].config.output.v": ""}},
		{"policy out of range", `{"name": "x", "settings": {"retryPolicy": {"initialDelayMs": 10}}, "steps": [` + step(`, "retryPolicy": {"maxRetries": 11}`) + `]}`,
			map[string]string{"settings.retryPolicy.initialDelayMs": "", "steps[0].retryPolicy.maxRetries": ""}},
		{"timeout out of range", `{"name": "x", "steps": [` + step(`, "timeoutMs": 5`) + `]}`, map[string]string{"steps[0].timeoutMs": "between"}},
		{"http config", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "ftp://x", "method": "BREW", "headers": {"X": 1}}}]}`,
			map[string]string{"steps[0].config.url": "http", "steps[0].config.method": "one of", "steps[0].config.headers.X": "string"}},
		{"posts to period", `{"name": "x", "settings": {"period": "{{ input.period }}"}, "steps": [` + step(`, "postsToPeriod": true`) + `]}`, nil},
		{"posts to period without a period", `{"name": "x", "steps": [` + step(`, "postsToPeriod": true`) + `]}`, map[string]string{"steps[0].postsToPeriod": "settings.period"}},
		{"unknown errors setting", `{"name": "x", "settings": {"unknownErrors": "sometimes"}, "steps": [` + step(``) + `]}`, map[string]string{"settings.unknownErrors": "retry"}},
		{"unknown key", `{"name": "x", "stepz": []}`, map[string]string{"definition": "stepz"}},
		{"wrong type", `{"name": 5, "steps": []}`, map[string]string{"definition": "name"}},
		{"not JSON", `{"name": `, map[string]string{"definition": ""}},
		{"trailing data", `{"name": "x", "steps": [` + step(``) + `]} {}`, map[string]string{"definition": "has data after the JSON object"}},
		{"trailing garbage", `{"name": "x", "steps": [` + step(``) + `]}]`, map[string]string{"definition": "has data after the JSON object"}},
		{"trailing whitespace is fine", `{"name": "x", "steps": [` + step(``) + `]}` + "\n\t ", nil},
		// Nothing PostgreSQL refuses: NUL anywhere, numbers out of float64 range.
		{"NUL in name", `{"name": "VAT\u0000", "steps": [` + step(``) + `]}`, map[string]string{"name": "NUL"}},
		{"NUL in description", `{"name": "x", "description": "a\u0000b", "steps": [` + step(``) + `]}`, map[string]string{"description": "NUL"}},
		{"NUL in step name", `{"name": "x", "steps": [` + step(`, "name": "\u0000"`) + `]}`, map[string]string{"steps[0].name": "NUL"}},
		{"NUL in config value", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"v": ["ok", "\u0000"]}}}]}`, map[string]string{"steps[0].config.output.v[1]": "NUL"}},
		{"NUL in config key", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"k\u0000": 1}}}]}`, map[string]string{"steps[0].config.output": "key with a NUL"}},
		{"huge number in config", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"n": 1e1000000}}}]}`, map[string]string{"steps[0].config.output.n": "out of range"}},
		{"huge number in policy", `{"name": "x", "settings": {"retryPolicy": {"maxRetries": -1e1000000}}, "steps": [` + step(``) + `]}`, map[string]string{"settings.retryPolicy.maxRetries": "out of range"}},
		// Templates may use input, steps and execution only.
		{"env root", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ env.HOME }}"}}]}`, map[string]string{"steps[0].config.output": "unknown name env"}},
		{"$env root", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"h": "x {{ $env.HOME }}"}}}]}`, map[string]string{"steps[0].config.output.h": "input, steps"}},
		{"bare name", `{"name": "x", "steps": [` + step(``) + `, {"id": "b", "type": "transform", "config": {"output": "{{ HOME }}"}}]}`, map[string]string{"steps[1].config.output": "unknown name HOME"}},
		{"$env computed", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ $env[input.k] }}"}}]}`, map[string]string{"steps[0].config.output": "unknown name"}},
		{"allowed roots", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ input.a }} {{ execution.id }} {{ $env.input.b }} {{ len(input.tags ?? []) }} {{ filter(input.xs ?? [], # > 1) }}"}}]}`, nil},
		// Headers without CR/LF; URLs only http and https.
		{"CRLF in header value", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X-A": "v\r\nX-Injected: 1"}}}]}`, map[string]string{"steps[0].config.headers.X-A": "control characters"}},
		{"LF in header value", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X-A": "v\n"}}}]}`, map[string]string{"steps[0].config.headers.X-A": "control characters"}},
		{"CRLF in header name", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X-A\r\nX-B": "v"}}}]}`, map[string]string{"steps[0].config.headers.X-A\r\nX-B": "header name"}},
		{"space in header name", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X A": "v"}}}]}`, map[string]string{"steps[0].config.headers.X A": "header name"}},
		{"templated header ok", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"Authorization": "Bearer {{ input.token }}"}}}]}`, nil},
		{"file URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "file:///etc/passwd"}}]}`, map[string]string{"steps[0].config.url": "http or https"}},
		{"gopher URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "gopher://x.example:70/_HELO"}}]}`, map[string]string{"steps[0].config.url": "http or https"}},
		{"scheme-relative URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "//x.example/a"}}]}`, map[string]string{"steps[0].config.url": "http or https"}},
		{"file URL behind a placeholder", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "{{ '' }}file:///etc/passwd"}}]}`, map[string]string{"steps[0].config.url": "http:// or https://"}},
		{"gopher URL with placeholder", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "gopher://{{ input.host }}/"}}]}`, map[string]string{"steps[0].config.url": "http:// or https://"}},
		{"templated https URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "HTTPS://{{ input.host }}/v1"}}]}`, nil},
		{"URL from input", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "{{ input.callbackUrl }}"}}]}`, nil},
		// Circuit breakers: seed 000's ranges, in the settings and in a step.
		{"breaker", `{"name": "x", "settings": {"circuitBreaker": {"failureThreshold": 3, "scope": "host"}}, "steps": [` + step(`, "circuitBreaker": {"resetTimeoutMs": 10000, "countErrors": ["timeout"]}`) + `]}`, nil},
		{"breaker out of range", `{"name": "x", "settings": {"circuitBreaker": {"failureThreshold": 0}}, "steps": [` + step(`, "circuitBreaker": {"halfOpenRequests": 11, "resetTimeoutMs": 5000}`) + `]}`,
			map[string]string{"settings.circuitBreaker.failureThreshold": "between 1 and 100", "steps[0].circuitBreaker.halfOpenRequests": "between 1 and 10", "steps[0].circuitBreaker.resetTimeoutMs": "between 10000 and 600000"}},
		// Compensations (seed 000's compensationActionSchema).
		{"compensations", `{"name": "x", "settings": {"rollbackOnFailure": true}, "steps": [` + step(`, "compensation": {"compensationType": "api_call", "config": {"url": "https://x.example/cancel/{{ step.output.id }}", "method": "DELETE", "body": {"nip": "{{ input.nip }}"}}}`) + `,
		  {"id": "b", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "database_operation", "config": {"connection": "erp", "statement": "UPDATE invoices SET booked = false WHERE id = $1", "params": ["{{ step.output }}"]}}},
		  {"id": "c", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "manual", "config": {"instructions": "Cancel the transfer in the bank."}}}]}`, nil},
		// The seed's own config names: endpoint, sqlTemplate, notificationTemplate.
		{"compensations, seed names", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "api_call", "config": {"endpoint": "https://x.example/cancel/{{ step.output.id }}", "method": "DELETE"}}`) + `,
		  {"id": "b", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "database_operation", "config": {"connection": "erp", "sqlTemplate": "UPDATE invoices SET booked = false WHERE id = $1", "params": ["{{ step.output }}"]}}},
		  {"id": "c", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "notification", "config": {"notificationTemplate": "Cofnięto {{ input.nip }}"}}}]}`, nil},
		{"compensations, seed names checked", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "api_call", "config": {"endpoint": "ftp://x.example/"}}`) + `,
		  {"id": "b", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "database_operation", "config": {"connection": "erp", "sqlTemplate": "DELETE FROM t WHERE id = '{{ step.output.id }}'"}}},
		  {"id": "c", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "notification", "config": {}}}]}`,
			map[string]string{"steps[0].compensation.config.endpoint": "http", "steps[1].compensation.config.sqlTemplate": "templates", "steps[2].compensation.config.notificationTemplate": "required"}},
		{"compensation type", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "undo"}`) + `]}`, map[string]string{"steps[0].compensation.compensationType": "one of"}},
		{"compensation config", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "database_operation", "config": {"statement": "DELETE FROM t WHERE id = '{{ step.output.id }}'"}}`) + `]}`,
			map[string]string{"steps[0].compensation.config.connection": "required", "steps[0].compensation.config.statement": "templates"}},
		{"compensation url", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "api_call", "config": {"url": "file:///etc/passwd"}}`) + `]}`, map[string]string{"steps[0].compensation.config.url": "http"}},
		{"compensation template root", `{"name": "x", "steps": [` + step(`, "compensation": {"compensationType": "notification", "config": {"message": "{{ env.HOME }}"}}`) + `]}`, map[string]string{"steps[0].compensation.config.message": "unknown name"}},
		// The subject is a template over the input only.
		{"subject", `{"name": "x", "settings": {"subject": "{{ input.clientName }} · {{ input.period }}"}, "steps": [` + step(``) + `]}`, nil},
		{"subject reads a step", `{"name": "x", "settings": {"subject": "{{ steps.a.output }}"}, "steps": [` + step(``) + `]}`, map[string]string{"settings.subject": "only input"}},
		{"subject syntax", `{"name": "x", "settings": {"subject": "{{ input. "}, "steps": [` + step(``) + `]}`, map[string]string{"settings.subject": ""}},
		{"subject too long", `{"name": "x", "settings": {"subject": "` + strings.Repeat("s", 301) + `"}, "steps": [` + step(``) + `]}`, map[string]string{"settings.subject": "at most 300"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := definition.Parse([]byte(c.def), reg)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v %+v", err, err)
				}
				if d.Name == "" || len(d.Steps) == 0 {
					t.Fatal("empty definition")
				}
				return
			}
			var me *apperr.Error
			if !errors.As(err, &me) || me.Code != apperr.EINVALID {
				t.Fatalf("want EINVALID, got %v", err)
			}
			for field, sub := range c.want {
				msg, ok := me.Fields[field]
				if !ok || !strings.Contains(msg, sub) {
					t.Errorf("field %s: got %q (all: %v), want containing %q", field, msg, me.Fields, sub)
				}
			}
		})
	}
}

func TestUsesCredentials(t *testing.T) {
	tests := []struct {
		def  definition.Definition
		want bool
	}{
		{definition.Definition{Steps: []definition.Step{{Config: map[string]any{"url": "https://x", "headers": map[string]any{"Authorization": "Bearer {{ credentials.ksef }}"}}}}}, true},
		{definition.Definition{Steps: []definition.Step{{Config: map[string]any{"url": "https://x"}, Compensation: &definition.Compensation{Config: map[string]any{"body": []any{"{{ credentials['bank'] }}"}}}}}}, true},
		{definition.Definition{Steps: []definition.Step{{Config: map[string]any{"url": "https://x/{{ input.nip }}"}}}}, false},
	}
	for i, tt := range tests {
		if got := tt.def.UsesCredentials(); got != tt.want {
			t.Errorf("%d: UsesCredentials = %v", i, got)
		}
	}
}

// TestPostsToPeriod: the first step marked postsToPeriod a run from step i goes through,
// along the normal sequence (a handler is not on it unless the run starts there).
func TestPostsToPeriod(t *testing.T) {
	d := definition.Definition{Steps: []definition.Step{
		{ID: "fetch"}, {ID: "post", PostsToPeriod: true}, {ID: "notify"}, {ID: "h", Handler: true, PostsToPeriod: true},
	}}
	for i, want := range []int{1, 1, -1, 3} {
		if got := d.PostsToPeriod(i); got != want {
			t.Errorf("PostsToPeriod(%d) = %d, want %d", i, got, want)
		}
	}
}
