package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// AskType is the name the ask step type is registered under.
const AskType = "ask"

// Ask is the step type that waits for a person (issue 25): approval, input, decision or
// error resolution. It only validates: the engine never runs it. An ask attempt makes a
// request (an intervention) and waits, WAITING, for its answer, timeout or cancel; the answer
// is the step's output.
type Ask struct{}

var _ Type = Ask{}

// Kinds of request (models.AskKinds; steps imports nothing of ours).
const (
	AskApproval        = "approval"
	AskInput           = "input"
	AskDecision        = "decision"
	AskErrorResolution = "error_resolution"
)

// AskConfig is an ask step's config (templates rendered, or as written).
type AskConfig struct {
	Kind             string            `json:"kind"`
	Title            string            `json:"title"`
	Message          string            `json:"message,omitempty"`
	Assignees        []string          `json:"assignees,omitempty"`
	TimeoutMs        int64             `json:"timeoutMs,omitempty"`
	TimeoutBeforeDue *TimeoutBeforeDue `json:"timeoutBeforeDue,omitempty"`
	RemindBeforeMs   int64             `json:"remindBeforeMs,omitempty"`
	Escalation       *AskEscalation    `json:"escalation,omitempty"`
	Schema           *AskSchema        `json:"schema,omitempty"`
	Options          []AskOption       `json:"options,omitempty"`
	DefaultOption    string            `json:"defaultOption,omitempty"`
	FourEyes         bool              `json:"fourEyes,omitempty"`
	OnReject         string            `json:"onReject,omitempty"`
	OnlyAbove        *AskOnlyAbove     `json:"onlyAbove,omitempty"`
}

// TimeoutBeforeDue times a request out this many working days before the execution's due date.
type TimeoutBeforeDue struct {
	WorkingDays int `json:"workingDays"`
}

// AskEscalation re-sends an unanswered request to its levels in order, each AfterMs after the
// previous one (the first after the request), for Repeat rounds (default 1).
type AskEscalation struct {
	Levels []AskLevel `json:"levels"`
	Repeat int        `json:"repeat,omitempty"`
}

// AskLevel is one escalation level: who gets the request after how long.
type AskLevel struct {
	AfterMs int64    `json:"afterMs"`
	To      []string `json:"to"`
}

// Rounds is how many times the levels are gone through (at least 1).
func (e *AskEscalation) Rounds() int {
	if e == nil || e.Repeat < 1 {
		return 1
	}
	return e.Repeat
}

// AskOption is one option of a decision (or error resolution).
type AskOption struct {
	ID          string `json:"id"`
	Label       string `json:"label,omitempty"`
	Destructive bool   `json:"destructive,omitempty"`
}

// AskOnlyAbove asks only when Amount (a template over the input) is above Limit: at or below
// it the step passes at once.
type AskOnlyAbove struct {
	Amount any    `json:"amount"`
	Limit  string `json:"limit"`
}

// ErrorResolutionOptions are an error resolution's fixed options.
var ErrorResolutionOptions = []AskOption{{ID: "continue", Label: "Fix and continue"}, {ID: "abort", Label: "Abort", Destructive: true}}

// DefaultAssignees are who may answer when the step names nobody: the organization's accountants.
var DefaultAssignees = []string{"role:accountant"}

// ParseAsk decodes an ask step's config (rendered or not), with the defaults applied
// (assignees, error resolution's options, onReject).
func ParseAsk(config map[string]any) (AskConfig, error) {
	var c AskConfig
	if err := decode(config, &c); err != nil {
		return c, err
	}
	if len(c.Assignees) == 0 {
		c.Assignees = slices.Clone(DefaultAssignees)
	}
	if c.Kind == AskErrorResolution {
		c.Options = slices.Clone(ErrorResolutionOptions)
	}
	if c.Kind == AskApproval && c.OnReject == "" {
		c.OnReject = "fail"
	}
	return c, nil
}

var (
	askKeys = []string{"kind", "title", "message", "assignees", "timeoutMs", "timeoutBeforeDue", "remindBeforeMs",
		"escalation", "schema", "options", "defaultOption", "fourEyes", "onReject", "onlyAbove"}
	fieldNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	optionIDPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	askRoles         = []string{"owner", "admin", "accountant"}
	// MaxAskTimeout bounds timeoutMs (a year) and escalation waits.
	MaxAskTimeout int64 = 366 * 24 * 3600 * 1000
)

// Validate checks an ask step's config as written; messages are keyed by the path inside it
// ("kind", "escalation.levels[0].to", "schema.fields[1].type").
func (Ask) Validate(config map[string]any) map[string]string {
	errs := unknownKeys(config, askKeys...)
	if errs == nil {
		errs = map[string]string{}
	}
	kind, _ := config["kind"].(string)
	if !slices.Contains([]string{AskApproval, AskInput, AskDecision, AskErrorResolution}, kind) {
		errs["kind"] = `must be "approval", "input", "decision" or "error_resolution"`
	}
	if t, ok := config["title"].(string); !ok || strings.TrimSpace(t) == "" {
		errs["title"] = "is required: what the person is asked (a template)"
	} else if len(t) > 500 {
		errs["title"] = "must be at most 500 characters"
	}
	if m, ok := config["message"]; ok {
		if s, ok := m.(string); !ok {
			errs["message"] = "must be a string"
		} else if len(s) > 5000 {
			errs["message"] = "must be at most 5000 characters"
		}
	}
	var c AskConfig
	if err := decode(config, &c); err != nil {
		errs[jsonField(err)] = "has the wrong type: " + plainJSONError(err)
		return errs
	}
	if _, ok := config["assignees"]; ok {
		if len(c.Assignees) == 0 {
			errs["assignees"] = "must name at least one role or person (or be left out: the accountants)"
		}
		for i, a := range c.Assignees {
			if msg := checkAssignee(a); msg != "" {
				errs[fmt.Sprintf("assignees[%d]", i)] = msg
			}
		}
	}
	validateAskTimeout(config, c, errs)
	if c.Escalation != nil {
		validateEscalation(c.Escalation, errs)
	}
	validateAskKind(config, kind, c, errs)
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func validateAskTimeout(config map[string]any, c AskConfig, errs map[string]string) {
	_, hasMs := config["timeoutMs"]
	if !hasMs && c.TimeoutBeforeDue == nil {
		errs["timeoutMs"] = "is required (or timeoutBeforeDue): a request never waits without a timeout"
	}
	if hasMs && (c.TimeoutMs < 1000 || c.TimeoutMs > MaxAskTimeout) {
		errs["timeoutMs"] = fmt.Sprintf("must be between 1000 (1 s) and %d (a year)", MaxAskTimeout)
	}
	if c.TimeoutBeforeDue != nil && (c.TimeoutBeforeDue.WorkingDays < 0 || c.TimeoutBeforeDue.WorkingDays > 60) {
		errs["timeoutBeforeDue.workingDays"] = "must be a whole number of working days between 0 and 60"
	}
	if _, ok := config["remindBeforeMs"]; ok {
		switch {
		case c.RemindBeforeMs < 1000:
			errs["remindBeforeMs"] = "must be at least 1000 (1 s)"
		case hasMs && c.RemindBeforeMs >= c.TimeoutMs:
			errs["remindBeforeMs"] = "must be shorter than timeoutMs: the reminder comes before the timeout"
		}
	}
}

func validateEscalation(e *AskEscalation, errs map[string]string) {
	if len(e.Levels) == 0 {
		errs["escalation.levels"] = "must have at least one level"
	}
	if len(e.Levels) > 10 {
		errs["escalation.levels"] = "must have at most 10 levels"
	}
	for i, l := range e.Levels {
		p := fmt.Sprintf("escalation.levels[%d]", i)
		if l.AfterMs < 1000 || l.AfterMs > MaxAskTimeout {
			errs[p+".afterMs"] = "must be between 1000 (1 s) and a year"
		}
		if len(l.To) == 0 {
			errs[p+".to"] = "must name at least one role or person"
		}
		for j, a := range l.To {
			if msg := checkAssignee(a); msg != "" {
				errs[fmt.Sprintf("%s.to[%d]", p, j)] = msg
			}
		}
	}
	if e.Repeat < 0 || e.Repeat > 10 {
		errs["escalation.repeat"] = "must be between 1 and 10 rounds"
	}
}

func validateAskKind(config map[string]any, kind string, c AskConfig, errs map[string]string) {
	only := func(key string, kinds ...string) bool {
		if _, ok := config[key]; ok && !slices.Contains(kinds, kind) {
			errs[key] = fmt.Sprintf("applies only to kind %s", strings.Join(kinds, " or "))
			return false
		}
		return true
	}
	only("schema", AskInput)
	only("options", AskDecision)
	only("defaultOption", AskDecision)
	only("fourEyes", AskApproval)
	only("onReject", AskApproval)
	only("onlyAbove", AskApproval)
	switch kind {
	case AskInput:
		if c.Schema == nil || len(c.Schema.Fields) == 0 {
			errs["schema.fields"] = "must describe at least one field of the form"
			return
		}
		validateSchema(c.Schema, errs)
	case AskDecision:
		if len(c.Options) < 2 {
			errs["options"] = "must offer at least two options"
		}
		seen := map[string]bool{}
		for i, o := range c.Options {
			p := fmt.Sprintf("options[%d]", i)
			switch {
			case !optionIDPattern.MatchString(o.ID):
				errs[p+".id"] = "must be 1-100 letters, digits, '_' or '-'"
			case seen[o.ID]:
				errs[p+".id"] = "duplicates another option's id"
			}
			seen[o.ID] = true
		}
		if c.DefaultOption != "" && !seen[c.DefaultOption] {
			errs["defaultOption"] = "must be the id of one of the options"
		}
	case AskApproval:
		if c.OnReject != "" && c.OnReject != "fail" && c.OnReject != "continue" {
			errs["onReject"] = `must be "fail" or "continue"`
		}
		if c.OnlyAbove != nil {
			switch a := c.OnlyAbove.Amount.(type) {
			case string:
				if strings.TrimSpace(a) == "" {
					errs["onlyAbove.amount"] = "is required: the amount compared (a template over the input)"
				}
			case float64:
			default:
				errs["onlyAbove.amount"] = "must be an amount or a template over the input"
			}
			if _, ok := ParseDecimal(c.OnlyAbove.Limit); !ok {
				errs["onlyAbove.limit"] = `must be a decimal amount, e.g. "50000.00"`
			}
		}
	}
}

// checkAssignee checks "role:<role>", an email, or a user's id.
func checkAssignee(a string) string {
	a = strings.TrimSpace(a)
	switch {
	case strings.HasPrefix(a, "role:"):
		if !slices.Contains(askRoles, strings.TrimPrefix(a, "role:")) {
			return "must be role:owner, role:admin or role:accountant (viewers never answer)"
		}
	case strings.Contains(a, "@"):
		if strings.ContainsAny(a, " \t<>") || strings.HasPrefix(a, "@") || strings.HasSuffix(a, "@") {
			return "is not an email address"
		}
	case a == "" || len(a) > 100:
		return `must be "role:<role>", an email address or a user's id`
	}
	return ""
}

func validateSchema(s *AskSchema, errs map[string]string) {
	if len(s.Fields) > 50 {
		errs["schema.fields"] = "must have at most 50 fields"
	}
	seen := map[string]bool{}
	for i, f := range s.Fields {
		p := fmt.Sprintf("schema.fields[%d]", i)
		switch {
		case !fieldNamePattern.MatchString(f.Name):
			errs[p+".name"] = "must be a name of letters, digits and '_' (not starting with a digit)"
		case seen[f.Name]:
			errs[p+".name"] = "duplicates another field's name"
		}
		seen[f.Name] = true
		if !slices.Contains(FieldTypes, f.Type) {
			errs[p+".type"] = "must be one of " + strings.Join(FieldTypes, ", ")
			continue
		}
		switch f.Type {
		case FieldEnum:
			if len(f.Options) == 0 {
				errs[p+".options"] = "must list the values an enum field allows"
			}
		case FieldNumber:
			for k, v := range map[string]any{"min": f.Min, "max": f.Max} {
				if v == nil {
					continue
				}
				if n, ok := v.(float64); !ok || math.IsInf(n, 0) {
					errs[p+"."+k] = "must be a number"
				}
			}
		case FieldAmount:
			for k, v := range map[string]any{"min": f.Min, "max": f.Max} {
				if v == nil {
					continue
				}
				if _, ok := decimalOf(v); !ok {
					errs[p+"."+k] = `must be a decimal amount, e.g. "0.01"`
				}
			}
		}
		if f.Pattern != "" {
			if f.Type != FieldString {
				errs[p+".pattern"] = "applies only to string fields"
			} else if _, err := regexp.Compile(f.Pattern); err != nil {
				errs[p+".pattern"] = "is not a valid regular expression"
			}
		}
	}
}

// Run is never called: the engine waits for the answer instead (services/engine, asks).
func (Ask) Run(context.Context, Input) (any, error) {
	return nil, errors.New("an ask step is not run: the engine waits for a person's answer")
}

// jsonField is the field a decoding error names ("" when none).
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field
	}
	return "config"
}

func plainJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "expected " + te.Type.String() + ", got " + te.Value
	}
	return err.Error()
}
