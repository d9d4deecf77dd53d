// Package steps defines what a workflow step type is and the built-in types: http,
// transform and delay. A program that embeds Lifeline registers its own types in a Registry.
//
// Contract: Run receives the step's config with every template already rendered and returns
// the step's output (any JSON-encodable value) or an error. Errors are classified by
// services/classify; a step that knows better returns classify.New(type, code, message).
// Run must honour ctx: the engine cancels it at the step's timeout and at shutdown.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// Input is what a step attempt receives.
type Input struct {
	ExecutionID    string
	StepID         string
	Attempt        int
	IdempotencyKey string
	// Config is the step's config with templates rendered.
	Config map[string]any
}

// Type is a kind of step.
type Type interface {
	// Validate checks a config as written (templates not yet rendered) and returns
	// field messages keyed by the path inside the config ("url", "headers.X"); nil if valid.
	Validate(config map[string]any) map[string]string
	// Run performs one attempt.
	Run(ctx context.Context, in Input) (any, error)
}

// Delayer is implemented by step types whose attempt must wait before running (delay).
// The engine schedules the attempt that much later in the database; nothing sleeps.
type Delayer interface {
	Delay(config map[string]any) time.Duration
}

// Registry maps type names to step types.
type Registry struct{ types map[string]Type }

// NewRegistry returns a registry with no types.
func NewRegistry() *Registry { return &Registry{types: map[string]Type{}} }

// Register adds or replaces a type.
func (r *Registry) Register(name string, t Type) { r.types[name] = t }

// Get returns the type registered under name.
func (r *Registry) Get(name string) (Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered type names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.types))
	for n := range r.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// decode converts a decoded-JSON config into a struct through JSON.
func decode(config map[string]any, v any) error {
	b, err := json.Marshal(config)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64, int:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// Builtins returns a registry with http (using client), transform, delay and ask.
func Builtins(client *http.Client) *Registry {
	r := NewRegistry()
	r.Register("http", &HTTP{Client: client})
	r.Register("transform", Transform{})
	r.Register("delay", Delay{})
	r.Register(AskType, Ask{})
	return r
}
