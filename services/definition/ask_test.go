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

// TestAskValidation: an ask step's config is checked at save, with field messages keyed
// steps[i].config.<path>; a wait without a timeout is refused.
func TestAskValidation(t *testing.T) {
	reg := steps.Builtins(http.DefaultClient)
	def := func(cfg string) string {
		return `{"name": "Ask", "steps": [{"id": "go", "type": "transform", "config": {"output": 1}}, {"id": "ask", "type": "ask", "config": ` + cfg + `}]}`
	}
	cases := []struct {
		name, cfg string
		want      map[string]string // field → substring; nil: valid
	}{
		{"approval", `{"kind": "approval", "title": "VAT {{ input.period }}", "message": "Due {{ input.vatDue }}", "assignees": ["role:admin", "partner@biuro.pl"],
			"timeoutMs": 172800000, "remindBeforeMs": 3600000, "escalation": {"levels": [{"afterMs": 3600000, "to": ["role:owner"]}], "repeat": 2},
			"fourEyes": true, "onReject": "continue", "onlyAbove": {"amount": "{{ input.vatDue }}", "limit": "50000.00"}}`, nil},
		{"input", `{"kind": "input", "title": "Invoice", "timeoutBeforeDue": {"workingDays": 2}, "schema": {"fields": [
			{"name": "invoiceNo", "type": "string", "required": true, "pattern": "^FV/"}, {"name": "amount", "type": "amount", "min": "0.01"},
			{"name": "category", "type": "enum", "options": ["cost", "transfer"]}, {"name": "paidOn", "type": "date"},
			{"name": "n", "type": "number", "min": 1, "max": 10}, {"name": "ok", "type": "boolean"}]}}`, nil},
		{"decision", `{"kind": "decision", "title": "Which?", "timeoutMs": 60000, "options": [{"id": "cost", "label": "Cost"}, {"id": "transfer", "destructive": true}], "defaultOption": "cost"}`, nil},
		{"error resolution", `{"kind": "error_resolution", "title": "Fix {{ steps.go.output }}", "timeoutMs": 60000}`, nil},
		{"no timeout", `{"kind": "approval", "title": "A"}`, map[string]string{"steps[1].config.timeoutMs": "never waits without a timeout"}},
		{"bad kind and title", `{"kind": "browser", "timeoutMs": 60000}`, map[string]string{"steps[1].config.kind": "approval", "steps[1].config.title": "required"}},
		{"timeout range", `{"kind": "approval", "title": "A", "timeoutMs": 5, "remindBeforeMs": 10}`, map[string]string{"steps[1].config.timeoutMs": "between", "steps[1].config.remindBeforeMs": "at least"}},
		{"reminder after timeout", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "remindBeforeMs": 60000}`, map[string]string{"steps[1].config.remindBeforeMs": "shorter"}},
		{"assignees", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "assignees": ["role:viewer", ""]}`, map[string]string{"steps[1].config.assignees[0]": "viewers", "steps[1].config.assignees[1]": "role"}},
		{"escalation", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "escalation": {"levels": [{"afterMs": 10, "to": []}], "repeat": 11}}`,
			map[string]string{"steps[1].config.escalation.levels[0].afterMs": "between", "steps[1].config.escalation.levels[0].to": "at least one", "steps[1].config.escalation.repeat": "between"}},
		{"schema", `{"kind": "input", "title": "I", "timeoutMs": 60000, "schema": {"fields": [{"name": "1x", "type": "text"}, {"name": "e", "type": "enum"}, {"name": "p", "type": "number", "pattern": "["}, {"name": "a", "type": "amount", "min": "abc"}]}}`,
			map[string]string{"steps[1].config.schema.fields[0].name": "letters", "steps[1].config.schema.fields[0].type": "one of", "steps[1].config.schema.fields[1].options": "enum",
				"steps[1].config.schema.fields[2].pattern": "only to string", "steps[1].config.schema.fields[3].min": "decimal"}},
		{"no schema", `{"kind": "input", "title": "I", "timeoutMs": 60000}`, map[string]string{"steps[1].config.schema.fields": "at least one"}},
		{"options", `{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "a"}], "defaultOption": "z"}`,
			map[string]string{"steps[1].config.options[1].id": "duplicates", "steps[1].config.defaultOption": "one of the options"}},
		{"one option", `{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}]}`, map[string]string{"steps[1].config.options": "two"}},
		{"keys of another kind", `{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "b"}], "fourEyes": true, "schema": {"fields": []}}`,
			map[string]string{"steps[1].config.fourEyes": "approval", "steps[1].config.schema": "input"}},
		{"onReject and onlyAbove", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "onReject": "ignore", "onlyAbove": {"amount": "", "limit": "lots"}}`,
			map[string]string{"steps[1].config.onReject": "fail", "steps[1].config.onlyAbove.amount": "required", "steps[1].config.onlyAbove.limit": "decimal"}},
		{"unknown key", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "deadline": 5}`, map[string]string{"steps[1].config.deadline": "unknown key"}},
		{"wrong type", `{"kind": "approval", "title": "A", "timeoutMs": "soon"}`, map[string]string{"steps[1].config.timeoutMs": "wrong type"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := definition.Parse([]byte(def(c.cfg)), reg)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %+v", err)
				}
				return
			}
			var me *apperr.Error
			if !errors.As(err, &me) || me.Code != apperr.EINVALID {
				t.Fatalf("want EINVALID, got %v", err)
			}
			for field, sub := range c.want {
				if msg, ok := me.Fields[field]; !ok || !strings.Contains(msg, sub) {
					t.Errorf("field %s: got %q (all: %v), want containing %q", field, msg, me.Fields, sub)
				}
			}
		})
	}
}
