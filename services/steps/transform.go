package steps

import (
	"context"
	"strings"
	"time"
)

// Transform builds its output from templates: config {"output": <any JSON with templates>}.
type Transform struct{}

var _ Type = Transform{}

// Validate requires an "output" key.
func (Transform) Validate(config map[string]any) map[string]string {
	if _, ok := config["output"]; !ok {
		return map[string]string{"output": "is required: the value this step produces"}
	}
	return unknownKeys(config, "output")
}

// Run returns the rendered output.
func (Transform) Run(_ context.Context, in Input) (any, error) { return in.Config["output"], nil }

// Delay waits durably: config {"ms": 1..86400000}. The engine schedules the attempt
// that much later; running it does nothing.
type Delay struct{}

var (
	_ Type    = Delay{}
	_ Delayer = Delay{}
)

// Validate checks ms.
func (Delay) Validate(config map[string]any) map[string]string {
	errs := unknownKeys(config, "ms")
	v, ok := config["ms"].(float64)
	if !ok {
		return merge(errs, map[string]string{"ms": "is required: a number of milliseconds"})
	}
	if v < 1 || v > 86400000 || v != float64(int64(v)) {
		return merge(errs, map[string]string{"ms": "must be a whole number between 1 and 86400000 (24 h)"})
	}
	return errs
}

// Delay returns how long the attempt waits.
func (Delay) Delay(config map[string]any) time.Duration {
	v, _ := config["ms"].(float64)
	return time.Duration(v) * time.Millisecond
}

// Run reports how long it waited.
func (d Delay) Run(_ context.Context, in Input) (any, error) {
	return map[string]any{"delayedMs": d.Delay(in.Config).Milliseconds()}, nil
}

func unknownKeys(config map[string]any, allowed ...string) map[string]string {
	var errs map[string]string
	for k := range config {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			if errs == nil {
				errs = map[string]string{}
			}
			errs[k] = "unknown key; allowed: " + strings.Join(allowed, ", ")
		}
	}
	return errs
}

func merge(a, b map[string]string) map[string]string {
	if a == nil {
		return b
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}
