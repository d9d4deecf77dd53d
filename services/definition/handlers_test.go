package definition_test

import (
	"errors"

	"net/http"
	"slices"
	"strings"
	"testing"

	"lifeline/models/apperr"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

// handlerDef is a workflow of fetch → post with two handlers; mod edits it before parsing.
func handlerDef(fetch, post, h1, h2, settings string) string {
	return `{"name": "VAT", "settings": {` + settings + `}, "steps": [
  {"id": "fetch", "type": "transform", "config": {"output": 1}` + fetch + `},
  {"id": "post", "type": "transform", "config": {"output": 2}` + post + `},
  {"id": "h1", "type": "transform", "handler": true, "config": {"output": "{{ error.message }} {{ failedStep.id }} {{ mapped.reason }}"}` + h1 + `},
  {"id": "h2", "type": "transform", "handler": true, "config": {"output": "{{ error.type }}"}` + h2 + `}]}`
}

func TestHandlerValidation(t *testing.T) {
	reg := steps.Builtins(http.DefaultClient)
	cases := []struct {
		name string
		def  string
		want map[string]string // field → substring of its message; nil = valid
	}{
		{"handler with mapping", handlerDef(`, "onFailure": {"handlerStepId": "h1", "inputMapping": {"reason": "{{ error.message }}", "in": "{{ failedStep.input }}"}}`, ``, ``, ``, ``), nil},
		{"by error type with default and next", handlerDef(`, "onFailure": {"byErrorType": {"validation": "h1", "authorization": "h2"}, "default": "h2"}`, ``, `, "next": "post"`, ``, ``), nil},
		{"workflow-wide", handlerDef(``, ``, ``, ``, `"onFailure": {"handlerStepId": "h2"}`), nil},
		{"unknown handler", handlerDef(`, "onFailure": {"handlerStepId": "nope"}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.handlerStepId": `unknown step "nope"`}},
		{"not marked handler", handlerDef(`, "onFailure": {"handlerStepId": "post"}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.handlerStepId": `not marked "handler": true`}},
		{"unknown error type", handlerDef(`, "onFailure": {"byErrorType": {"flaky": "h1"}}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.byErrorType.flaky": "transient, permanent"}},
		{"type to a normal step", handlerDef(`, "onFailure": {"byErrorType": {"timeout": "post"}}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.byErrorType.timeout": "not marked"}},
		{"names nothing", handlerDef(`, "onFailure": {}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure": "must name a handler"}},
		{"both default and handlerStepId", handlerDef(`, "onFailure": {"handlerStepId": "h1", "default": "h2"}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.default": "not both"}},
		{"workflow-wide unknown", handlerDef(``, ``, ``, ``, `"onFailure": {"default": "zzz"}`), map[string]string{"settings.onFailure.default": "unknown step"}},
		{"handler with its own handler", handlerDef(``, ``, `, "onFailure": {"handlerStepId": "h2"}`, ``, ``), map[string]string{"steps[2].onFailure": "never triggers another handler"}},
		{"next loops back", handlerDef(``, `, "onFailure": {"handlerStepId": "h1"}`, `, "next": "fetch"`, ``, ``), map[string]string{"steps[2].next": "does not come after"}},
		{"next to itself", handlerDef(``, `, "onFailure": {"handlerStepId": "h1"}`, `, "next": "post"`, ``, ``), map[string]string{"steps[2].next": "does not come after"}},
		{"next to a handler", handlerDef(`, "onFailure": {"handlerStepId": "h1"}`, ``, `, "next": "h2"`, ``, ``), map[string]string{"steps[2].next": "next must be a step of the normal sequence"}},
		{"next unknown", handlerDef(``, ``, `, "next": "zzz"`, ``, ``), map[string]string{"steps[2].next": "unknown step"}},
		{"next on a normal step", handlerDef(`, "next": "post"`, ``, ``, ``, ``), map[string]string{"steps[0].next": "only a handler step"}},
		{"error roots outside a handler", handlerDef(``, ``, ``, ``, ``)[:0] + `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ error.message }}"}}]}`,
			map[string]string{"steps[0].config.output": "unknown name error"}},
		{"mapping reads mapped", handlerDef(`, "onFailure": {"handlerStepId": "h1", "inputMapping": {"x": "{{ mapped.y }}"}}`, ``, ``, ``, ``), map[string]string{"steps[0].onFailure.inputMapping.x": "unknown name mapped"}},
		{"only handlers", `{"name": "x", "steps": [{"id": "h", "type": "transform", "handler": true, "config": {"output": 1}}]}`, map[string]string{"steps": "not a handler"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := definition.Parse([]byte(c.def), reg)
			got := fields(err)
			if c.want == nil {
				if err != nil {
					t.Fatalf("want valid, got %v %v", err, got)
				}
				return
			}
			for f, sub := range c.want {
				if !strings.Contains(got[f], sub) {
					t.Errorf("%s: want %q in %q (all: %v)", f, sub, got[f], got)
				}
			}
		})
	}
}

func TestHandlerRouting(t *testing.T) {
	reg := steps.Builtins(http.DefaultClient)
	d, err := definition.Parse([]byte(handlerDef(`, "onFailure": {"byErrorType": {"validation": "h1"}, "default": "h2"}`, ``, `, "next": "post"`, ``,
		`"onFailure": {"handlerStepId": "h2"}`)), reg)
	if err != nil {
		t.Fatal(err, fields(err))
	}
	cases := []struct {
		step int
		typ  string
		want int
	}{
		{0, "validation", 2}, {0, "transient", 3}, {1, "timeout", 3} /* workflow-wide */, {2, "validation", -1}, {3, "transient", -1},
	}
	for _, c := range cases {
		if got, _ := d.HandlerFor(c.step, c.typ); got != c.want {
			t.Errorf("HandlerFor(%d, %s) = %d, want %d", c.step, c.typ, got, c.want)
		}
	}
	if d.First() != 0 || d.After(0) != 1 || d.After(1) != -1 || d.After(2) != 1 || d.After(3) != -1 {
		t.Errorf("sequence: first %d, after 0→%d 1→%d h1→%d h2→%d", d.First(), d.After(0), d.After(1), d.After(2), d.After(3))
	}
	if got := d.Served(2); !slices.Equal(got, []string{"fetch"}) {
		t.Errorf("h1 serves %v", got)
	}
	if got := d.Served(3); !slices.Equal(got, []string{"fetch", "post"}) {
		t.Errorf("h2 serves %v", got)
	}
}

// fields returns the field messages of a *apperr.Error (nil for any other error).
func fields(err error) map[string]string {
	var me *apperr.Error
	if errors.As(err, &me) {
		return me.Fields
	}
	return nil
}
