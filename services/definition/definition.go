// Package definition parses and validates workflow definitions: the JSON users write.
//
// Parse never returns a half-valid definition: either every field is valid, or the result
// is a *apperr.Error with code EINVALID and a message per field path ("steps[1].config.url").
package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"lifeline/models/apperr"
	"lifeline/services/breaker"
	"lifeline/services/retry"
	"lifeline/services/steps"
	"lifeline/services/tmpl"
)

// Unknown-error settings.
const (
	UnknownRetry   = "retry"
	UnknownNoRetry = "no_retry"
)

// Limits.
const (
	MaxSteps         = 50
	MinStepTimeoutMs = 100
	MaxStepTimeoutMs = 600000
	// DefaultStepTimeoutMs applies when a step sets none.
	DefaultStepTimeoutMs = 30000
)

// Definition is a workflow: settings and an ordered list of steps.
type Definition struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Settings    Settings `json:"settings"`
	Steps       []Step   `json:"steps"`
}

// Settings apply to the whole workflow.
type Settings struct {
	RetryPolicy   *retry.Spec `json:"retryPolicy,omitempty"`
	UnknownErrors string      `json:"unknownErrors,omitempty"`
	// RollbackOnFailure: when a step fails for good, the compensations of the completed steps
	// run in reverse order. RollbackStopOnFailure: a compensation that fails for good stops
	// the rollback (else the others still run).
	RollbackOnFailure     bool `json:"rollbackOnFailure,omitempty"`
	RollbackStopOnFailure bool `json:"rollbackStopOnFailure,omitempty"`
	// CircuitBreaker configures the breakers of every step (a step's own wins, field by field).
	CircuitBreaker *breaker.Spec `json:"circuitBreaker,omitempty"`
	// Subject is a template over the input ("{{ input.clientName }} · {{ input.period }}"),
	// rendered when an execution starts: the execution's title in every list and page.
	Subject string `json:"subject,omitempty"`
	// OnFailure applies to every step of the normal sequence without its own.
	OnFailure *OnFailure `json:"onFailure,omitempty"`
	// ErrorNotifications is seed 000's errorNotificationConfig for this workflow: the keys it
	// sets win over the organization's defaults (services/notify validates and applies it).
	ErrorNotifications json.RawMessage `json:"errorNotifications,omitempty"`
	// MovesMoney marks a workflow that moves money (ledger postings, payments): an
	// accountant's edited input waits for an admin's approval before the replay runs.
	MovesMoney bool `json:"movesMoney,omitempty"`
	// About: the client, period, amount and obligation of each execution (about.go).
	About
}

// MaxSubject bounds a rendered subject (longer ones are cut) and the template itself.
const MaxSubject = 300

// Step is one step.
type Step struct {
	ID          string         `json:"id"`
	Name        string         `json:"name,omitempty"`
	Type        string         `json:"type"`
	Config      map[string]any `json:"config"`
	RetryPolicy *retry.Spec    `json:"retryPolicy,omitempty"`
	TimeoutMs   int            `json:"timeoutMs,omitempty"`
	// CircuitBreaker configures the step's breaker over the workflow's settings.
	CircuitBreaker *breaker.Spec `json:"circuitBreaker,omitempty"`
	// Compensation undoes the step when the execution is rolled back.
	Compensation *Compensation `json:"compensation,omitempty"`
	// OnFailure hands the step's failure for good to a handler step instead of the DLQ.
	OnFailure *OnFailure `json:"onFailure,omitempty"`
	// FallbackStepID names a handler step that runs instead of this one while this step's
	// circuit breaker is open (see fallback.go).
	FallbackStepID string `json:"fallbackStepId,omitempty"`
	// Handler marks a step that runs only when a failure is handed to it, never in the
	// normal sequence. Next (handlers only) names the step the sequence goes on at after
	// the handler succeeds; without it the execution ends PARTIAL.
	Handler bool   `json:"handler,omitempty"`
	Next    string `json:"next,omitempty"`
	// PostsToPeriod marks a step that posts to the ledger or files a declaration for the
	// execution's period (settings.period, required with it): while the office has that
	// period closed (services/periods) for the execution's client or every client, the step
	// is not run. A manual replay that would run it is refused (409 period_closed); an
	// attempt due for it fails unsent, classified validation / period_closed, and the
	// execution goes to the DLQ without further retries.
	PostsToPeriod bool `json:"postsToPeriod,omitempty"`
}

// PostsToPeriod returns the first step marked postsToPeriod that a run from step i goes
// through (step i, then each step After it), or -1: a replay from step i that would run it
// is refused while the execution's period is closed.
func (d *Definition) PostsToPeriod(i int) int {
	for j, n := i, 0; j >= 0 && j < len(d.Steps) && n <= len(d.Steps); j, n = d.After(j), n+1 {
		if d.Steps[j].PostsToPeriod {
			return j
		}
	}
	return -1
}

// Breaker is the effective breaker configuration of step i.
func (d *Definition) Breaker(i int) breaker.Config {
	var st *breaker.Spec
	if i >= 0 && i < len(d.Steps) {
		st = d.Steps[i].CircuitBreaker
	}
	return breaker.Resolve(d.Settings.CircuitBreaker, st)
}

// Title is the step's name, or its id.
func (s Step) Title() string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

// Undoes reports whether the step has a compensation that does something (not none): a
// rollback after it completed has something to undo.
func (s Step) Undoes() bool {
	return s.Compensation != nil && s.Compensation.CompensationType != CompNone
}

// Timeout returns the step's timeout in milliseconds, with the default applied.
func (s Step) Timeout() int {
	if s.TimeoutMs > 0 {
		return s.TimeoutMs
	}
	return DefaultStepTimeoutMs
}

// UnknownRetry reports whether errors classified unknown are retried (the default).
func (d *Definition) UnknownRetry() bool { return d.Settings.UnknownErrors != UnknownNoRetry }

// Index returns the position of the step with id, or -1.
func (d *Definition) Index(id string) int {
	for i, s := range d.Steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}

var stepIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$`)

// TemplateRoots are the names step templates may use: the environment the engine renders
// them in (input, steps.<id>, execution, and the organization's credentials.<name>).
// `{{ env.HOME }}` and any other name is refused when the definition is saved.
var TemplateRoots = []string{"credentials", "execution", "input", "steps"}

// Check is a rule of the caller's over a decoded definition: field messages, or nil.
type Check func(d *Definition) map[string]string

// Parse decodes and validates raw against the registered step types and the checks given
// (their messages join Validate's in one error). Besides the rules of
// Validate, raw must be exactly one JSON object (data after it is refused) holding nothing a
// database cannot store as it is: no NUL character (\u0000) in any string or key, no number
// out of the range of a float64 (1e1000000).
func Parse(raw []byte, reg *steps.Registry, checks ...Check) (*Definition, error) {
	if field, problem := unstorable(raw); problem != "" {
		return nil, apperr.Invalid("The definition cannot be stored.", map[string]string{field: problem})
	}
	var d Definition
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, apperr.Invalid("The definition is not valid JSON of the expected shape.", map[string]string{"definition": jsonProblem(err)})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, apperr.Invalid("The definition must be one JSON object.", map[string]string{"definition": "has data after the JSON object"})
	}
	errs := d.Validate(reg)
	for _, check := range checks {
		for k, v := range check(&d) {
			if errs == nil {
				errs = map[string]string{}
			}
			errs[k] = v
		}
	}
	if len(errs) > 0 {
		return nil, apperr.Invalid("The workflow definition has errors.", errs)
	}
	return &d, nil
}

// Validate returns field messages, or nil when d is valid.
func (d *Definition) Validate(reg *steps.Registry) map[string]string {
	errs := map[string]string{}
	d.Name = strings.TrimSpace(d.Name)
	switch {
	case d.Name == "":
		errs["name"] = "is required"
	case len(d.Name) > 200:
		errs["name"] = "must be at most 200 characters"
	}
	if len(d.Description) > 2000 {
		errs["description"] = "must be at most 2000 characters"
	}
	switch d.Settings.UnknownErrors {
	case "", UnknownRetry, UnknownNoRetry:
	default:
		errs["settings.unknownErrors"] = `must be "retry" or "no_retry"`
	}
	if d.Settings.Subject != "" {
		if len(d.Settings.Subject) > MaxSubject {
			errs["settings.subject"] = fmt.Sprintf("must be at most %d characters", MaxSubject)
		} else if _, terrs := tmpl.Check(d.Settings.Subject, "input"); len(terrs) > 0 {
			for _, v := range terrs {
				errs["settings.subject"] = v + " (a subject can read only input)"
			}
		}
	}
	d.Settings.About.validateAbout(errs)
	if d.Settings.CircuitBreaker != nil {
		for k, v := range d.Settings.CircuitBreaker.Validate() {
			errs["settings.circuitBreaker."+k] = v
		}
	}
	if d.Settings.RetryPolicy != nil {
		for k, v := range d.Settings.RetryPolicy.Validate() {
			errs["settings.retryPolicy."+k] = v
		}
	}
	switch {
	case len(d.Steps) == 0:
		errs["steps"] = "must have at least one step"
	case len(d.Steps) > MaxSteps:
		errs["steps"] = fmt.Sprintf("must have at most %d steps", MaxSteps)
	}
	seen := map[string]int{}
	for i, s := range d.Steps {
		p := fmt.Sprintf("steps[%d]", i)
		switch {
		case s.ID == "":
			errs[p+".id"] = "is required"
		case !stepIDPattern.MatchString(s.ID):
			errs[p+".id"] = "must be 1-100 letters, digits, '_' or '-'"
		default:
			if j, dup := seen[s.ID]; dup {
				errs[p+".id"] = fmt.Sprintf("duplicates the id of steps[%d]", j)
			} else {
				seen[s.ID] = i
			}
		}
		if len(s.Name) > 200 {
			errs[p+".name"] = "must be at most 200 characters"
		}
		if s.TimeoutMs != 0 && (s.TimeoutMs < MinStepTimeoutMs || s.TimeoutMs > MaxStepTimeoutMs) {
			errs[p+".timeoutMs"] = fmt.Sprintf("must be between %d and %d", MinStepTimeoutMs, MaxStepTimeoutMs)
		}
		if s.RetryPolicy != nil {
			for k, v := range s.RetryPolicy.Validate() {
				errs[p+".retryPolicy."+k] = v
			}
		}
		if s.CircuitBreaker != nil {
			for k, v := range s.CircuitBreaker.Validate() {
				errs[p+".circuitBreaker."+k] = v
			}
		}
		if s.Compensation != nil {
			validateCompensation(s.Compensation, p+".compensation", errs)
		}
		if s.PostsToPeriod && d.Settings.Period == "" {
			errs[p+".postsToPeriod"] = "needs settings.period: a closed period is checked against the execution's period"
		}
		t, ok := reg.Get(s.Type)
		if !ok {
			errs[p+".type"] = fmt.Sprintf("unknown step type %q; known types: %s", s.Type, strings.Join(reg.Names(), ", "))
			continue
		}
		if s.Config == nil {
			s.Config = map[string]any{}
			d.Steps[i].Config = s.Config
		}
		for k, v := range t.Validate(s.Config) {
			errs[p+".config."+k] = v
		}
		roots := TemplateRoots
		if s.Handler {
			roots = append(slices.Clone(TemplateRoots), HandlerRoots...)
		}
		refs, terrs := tmpl.Check(s.Config, roots...)
		for k, v := range terrs {
			errs[joinPath(p+".config", k)] = v
		}
		for _, r := range refs {
			j, known := seen[r.StepID]
			switch {
			case d.Index(r.StepID) < 0:
				errs[joinPath(p+".config", r.Path)] = fmt.Sprintf("template %q names unknown step %q", r.Expr, r.StepID)
			case !known || j >= i:
				errs[joinPath(p+".config", r.Path)] = fmt.Sprintf("template %q names step %q, which runs later; only earlier steps' outputs are available", r.Expr, r.StepID)
			}
		}
	}
	d.validateHandlers(errs)
	d.validateFallbacks(errs)
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// unstorable finds the first string or key holding a NUL character and the first number
// out of float64 range in raw, and returns its field path ("steps[0].config.url",
// "definition" for the root) and the problem; "" when there is none or raw is not JSON
// (decoding then reports the problem).
func unstorable(raw []byte) (field, problem string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", ""
	}
	field, problem = walkUnstorable(v, "")
	if field == "" {
		field = "definition"
	}
	return field, problem
}

func walkUnstorable(v any, path string) (string, string) {
	switch x := v.(type) {
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return path, `contains a NUL character (\u0000), which cannot be stored`
		}
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return path, fmt.Sprintf("is a number out of range (%.40s); write it as a string", string(x))
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if strings.IndexByte(k, 0) >= 0 {
				return path, `has a key with a NUL character (\u0000), which cannot be stored`
			}
			if f, p := walkUnstorable(x[k], joinPath(path, k)); p != "" {
				return f, p
			}
		}
	case []any:
		for i, e := range x {
			if f, p := walkUnstorable(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return f, p
			}
		}
	}
	return "", ""
}

func joinPath(prefix, p string) string {
	switch {
	case p == "":
		return prefix
	case prefix == "":
		return p
	case strings.HasPrefix(p, "["):
		return prefix + p
	}
	return prefix + "." + p
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("expected %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.EOF):
		return "is empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(k string) string {
	switch k {
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	case "string":
		return "a string"
	case "int", "float64", "int64":
		return "a number"
	case "bool":
		return "true or false"
	}
	return k
}

// JSON returns the canonical JSON of d.
func (d *Definition) JSON() []byte {
	b, _ := json.Marshal(d)
	return b
}

// UsesCredentials reports whether any template of d (a step's configuration or its
// compensation's) may read the organization's credentials: the engine loads them only then.
// It may say yes for a string that merely contains the word; never no for one that reads them.
func (d *Definition) UsesCredentials() bool {
	for _, s := range d.Steps {
		if mentions(s.Config, "credentials") || (s.Compensation != nil && mentions(s.Compensation.Config, "credentials")) {
			return true
		}
	}
	return false
}

// mentions reports whether a string or key anywhere in v contains word.
func mentions(v any, word string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, word)
	case map[string]any:
		for k, x := range v {
			if strings.Contains(k, word) || mentions(x, word) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if mentions(x, word) {
				return true
			}
		}
	}
	return false
}
