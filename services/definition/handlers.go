package definition

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"lifeline/services/classify"
	"lifeline/services/tmpl"
)

// OnFailure hands a step that fails for good (retries exhausted, or an error not retried) to
// a handler step instead of the dead-letter queue. The handler is chosen by the error's type:
// ByErrorType[type], else Default, else HandlerStepID (HandlerStepID and Default are the same
// thing; a definition gives one of them). InputMapping, rendered with the handler's templates,
// is recorded as the handler attempt's input and read in its templates as mapped.<name>.
type OnFailure struct {
	HandlerStepID string            `json:"handlerStepId,omitempty"`
	ByErrorType   map[string]string `json:"byErrorType,omitempty"`
	Default       string            `json:"default,omitempty"`
	InputMapping  map[string]any    `json:"inputMapping,omitempty"`
}

// HandlerRoots are the names a handler step's templates may use, beside TemplateRoots: the
// error (type, code, message), the failed step (id, input) and the rendered input mapping.
var HandlerRoots = []string{"error", "failedStep", "mapped"}

// mappingRoots are the names an input mapping may use.
var mappingRoots = []string{"execution", "input", "steps", "error", "failedStep"}

// handlerID returns the id of the handler for errors of type t ("" when none applies).
func (o *OnFailure) handlerID(t string) string {
	if id, ok := o.ByErrorType[t]; ok {
		return id
	}
	if o.Default != "" {
		return o.Default
	}
	return o.HandlerStepID
}

// ids returns every handler id o names, sorted.
func (o *OnFailure) ids() []string {
	set := map[string]bool{}
	for _, id := range []string{o.HandlerStepID, o.Default} {
		if id != "" {
			set[id] = true
		}
	}
	for _, id := range o.ByErrorType {
		set[id] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// OnFailureOf returns the on-failure rule of step i: its own, else the workflow's (nil for a
// handler step: a handler never triggers another handler).
func (d *Definition) OnFailureOf(i int) *OnFailure {
	if i < 0 || i >= len(d.Steps) || d.Steps[i].Handler {
		return nil
	}
	if d.Steps[i].OnFailure != nil {
		return d.Steps[i].OnFailure
	}
	return d.Settings.OnFailure
}

// HandlerFor returns the index of the handler step i hands an error of type errorType to
// when it fails for good, and the rule that chose it; -1 when the failure is not handled.
func (d *Definition) HandlerFor(i int, errorType string) (int, *OnFailure) {
	of := d.OnFailureOf(i)
	if of == nil {
		return -1, nil
	}
	h := d.Index(of.handlerID(errorType))
	if h < 0 || !d.Steps[h].Handler {
		return -1, nil
	}
	return h, of
}

// First returns the index of the first step of the normal sequence (handlers are never in it).
func (d *Definition) First() int {
	for i, s := range d.Steps {
		if !s.Handler {
			return i
		}
	}
	return 0
}

// After returns the index of the step that runs after step i succeeds, or -1 when the
// execution ends there: for a step of the normal sequence, the next one that is not a
// handler; for a handler, the step its Next names (-1 when it names none: the execution ends
// PARTIAL).
func (d *Definition) After(i int) int {
	if i < 0 || i >= len(d.Steps) {
		return -1
	}
	if d.Steps[i].Handler {
		if d.Steps[i].Next == "" {
			return -1
		}
		return d.Index(d.Steps[i].Next)
	}
	for j := i + 1; j < len(d.Steps); j++ {
		if !d.Steps[j].Handler {
			return j
		}
	}
	return -1
}

// Served returns the ids of the steps that may hand their failure to handler h (in order).
func (d *Definition) Served(h int) []string {
	if h < 0 || h >= len(d.Steps) || !d.Steps[h].Handler {
		return nil
	}
	id := d.Steps[h].ID
	var out []string
	for i := range d.Steps {
		if of := d.OnFailureOf(i); of != nil && slices.Contains(of.ids(), id) {
			out = append(out, d.Steps[i].ID)
		}
	}
	return out
}

// validateHandlers checks the on-failure rules and handler steps: every id a rule names
// exists and is marked handler; error types are the nine; a handler declares no onFailure
// of its own; its next names a step of the normal sequence after every step it serves (so
// next never loops back).
func (d *Definition) validateHandlers(errs map[string]string) {
	normal := 0
	for _, s := range d.Steps {
		if !s.Handler {
			normal++
		}
	}
	if len(d.Steps) > 0 && normal == 0 {
		errs["steps"] = "must have at least one step that is not a handler"
	}
	if d.Settings.OnFailure != nil {
		d.validateOnFailure(d.Settings.OnFailure, "settings.onFailure", errs)
	}
	for i, s := range d.Steps {
		p := fmt.Sprintf("steps[%d]", i)
		if s.OnFailure != nil {
			if s.Handler {
				errs[p+".onFailure"] = "a handler step cannot have its own onFailure (a handler never triggers another handler)"
			} else {
				d.validateOnFailure(s.OnFailure, p+".onFailure", errs)
			}
		}
		if !s.Handler {
			if s.Next != "" {
				errs[p+".next"] = `only a handler step ("handler": true) can name next`
			}
			continue
		}
		if s.Compensation != nil {
			errs[p+".compensation"] = "a handler step cannot have a compensation"
		}
		if s.Next == "" {
			continue
		}
		n := d.Index(s.Next)
		switch {
		case n < 0:
			errs[p+".next"] = fmt.Sprintf("names unknown step %q", s.Next)
		case d.Steps[n].Handler:
			errs[p+".next"] = fmt.Sprintf("names handler step %q; next must be a step of the normal sequence", s.Next)
		default:
			for _, served := range d.Served(i) {
				if d.Index(served) >= n {
					errs[p+".next"] = fmt.Sprintf("names step %q, which does not come after step %q that this handler serves (that would run it again in a loop)", s.Next, served)
					break
				}
			}
		}
	}
}

func (d *Definition) validateOnFailure(o *OnFailure, p string, errs map[string]string) {
	if o.HandlerStepID != "" && o.Default != "" {
		errs[p+".default"] = "give handlerStepId or default, not both"
	}
	if o.HandlerStepID == "" && o.Default == "" && len(o.ByErrorType) == 0 {
		errs[p] = "must name a handler: handlerStepId, byErrorType or default"
	}
	check := func(field, id string) {
		switch i := d.Index(id); {
		case id == "":
			errs[field] = "is required"
		case i < 0:
			errs[field] = fmt.Sprintf("names unknown step %q", id)
		case !d.Steps[i].Handler:
			errs[field] = fmt.Sprintf(`names step %q, which is not marked "handler": true`, id)
		}
	}
	if o.HandlerStepID != "" {
		check(p+".handlerStepId", o.HandlerStepID)
	}
	if o.Default != "" {
		check(p+".default", o.Default)
	}
	for _, t := range slices.Sorted(maps.Keys(o.ByErrorType)) {
		if _, ok := classify.ParseType(t); !ok {
			names := make([]string, 0, 9)
			for _, t := range classify.Types() {
				names = append(names, string(t))
			}
			errs[p+".byErrorType."+t] = "is not an error type; use one of " + strings.Join(names, ", ")
			continue
		}
		check(p+".byErrorType."+t, o.ByErrorType[t])
	}
	if len(o.InputMapping) > 0 {
		_, terrs := tmpl.Check(o.InputMapping, mappingRoots...)
		for k, v := range terrs {
			errs[joinPath(p+".inputMapping", k)] = v
		}
	}
}
