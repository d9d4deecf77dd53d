package definition_test

import (
	"net/http"
	"strings"
	"testing"

	"lifeline/services/definition"
	"lifeline/services/steps"
)

// fallbackDef is a workflow of fetch → post with handlers h1 and h2; fetch, h1 and the
// settings are edited by the arguments.
func fallbackDef(fetch, h1, settings string) string {
	return `{"name": "x", "settings": {` + settings + `}, "steps": [
  {"id": "fetch", "type": "transform", "config": {"output": 1}` + fetch + `},
  {"id": "post", "type": "transform", "config": {"output": "{{ steps.fetch.output }}"}},
  {"id": "h1", "type": "transform", "handler": true, "config": {"output": "{{ failedStep.id }}"}` + h1 + `},
  {"id": "h2", "type": "transform", "handler": true, "config": {"output": 2}}]}`
}

func TestFallbackValidation(t *testing.T) {
	reg := steps.Builtins(http.DefaultClient)
	cases := []struct {
		name string
		def  string
		want map[string]string // field → substring of its message; nil: valid
	}{
		{"valid", fallbackDef(`, "fallbackStepId": "h1"`, ``, ``), nil},
		{"valid beside on-failure", fallbackDef(`, "fallbackStepId": "h1", "onFailure": {"handlerStepId": "h2"}`, ``, ``), nil},
		{"unknown", fallbackDef(`, "fallbackStepId": "nope"`, ``, ``), map[string]string{"steps[0].fallbackStepId": `unknown step "nope"`}},
		{"itself", fallbackDef(`, "fallbackStepId": "fetch"`, ``, ``), map[string]string{"steps[0].fallbackStepId": "the step itself"}},
		{"not a handler", fallbackDef(`, "fallbackStepId": "post"`, ``, ``), map[string]string{"steps[0].fallbackStepId": `not marked "handler": true`}},
		{"chain", fallbackDef(`, "fallbackStepId": "h1"`, `, "fallbackStepId": "h2"`, ``), map[string]string{
			"steps[0].fallbackStepId": "do not chain", "steps[2].fallbackStepId": "a handler step cannot have a fallback"}},
		{"breaker off on the step", fallbackDef(`, "fallbackStepId": "h1", "circuitBreaker": {"enabled": false}`, ``, ``),
			map[string]string{"steps[0].fallbackStepId": "circuit breaker, which is disabled"}},
		{"breaker off for the workflow", fallbackDef(`, "fallbackStepId": "h1"`, ``, `"circuitBreaker": {"enabled": false}`),
			map[string]string{"steps[0].fallbackStepId": "circuit breaker, which is disabled"}},
		{"breaker off for the workflow, on for the step", fallbackDef(`, "fallbackStepId": "h1", "circuitBreaker": {"enabled": true}`, ``, `"circuitBreaker": {"enabled": false}`), nil},
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
			if err == nil {
				t.Fatalf("want field errors %v, got a valid definition", c.want)
			}
			for f, sub := range c.want {
				if !strings.Contains(got[f], sub) {
					t.Errorf("%s: want %q in %q (all: %v)", f, sub, got[f], got)
				}
			}
		})
	}
}

func TestFallbackOf(t *testing.T) {
	d, err := definition.Parse([]byte(fallbackDef(`, "fallbackStepId": "h1"`, ``, ``)), steps.Builtins(http.DefaultClient))
	if err != nil {
		t.Fatal(err, fields(err))
	}
	for i, want := range []int{2, -1, -1, -1, -1} {
		if got := d.FallbackOf(i); got != want {
			t.Errorf("FallbackOf(%d) = %d, want %d", i, got, want)
		}
	}
}
