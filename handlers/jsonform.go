package handlers

import (
	"encoding/json"
	"strconv"

	"lifeline/services/classify"
	"lifeline/services/redact"
	"lifeline/services/retry"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// policyField is one field of the retry-policy override's form, as static/js/forms.js
// builds it: its JSON key (retry.Spec's), label, kind, and the limits retry.Spec.Validate
// enforces (retry.Bounds), so the form refuses what the server would.
type policyField struct {
	Key          string         `json:"key"`
	Label        string         `json:"label"`
	Kind         string         `json:"kind"` // int, float, enum, types, list
	Min          *float64       `json:"min,omitempty"`
	Max          *float64       `json:"max,omitempty"`
	Step         float64        `json:"step,omitempty"`
	Default      *float64       `json:"default,omitempty"`
	ZeroAllowed  bool           `json:"zeroAllowed,omitempty"`
	Hint         string         `json:"hint,omitempty"`
	Range        string         `json:"range,omitempty"` // the message for a value outside the limits
	DefaultLabel string         `json:"defaultLabel,omitempty"`
	Options      []policyOption `json:"options,omitempty"`
}

type policyOption struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// jsonFormVM is what the item page's fields built from the data need, in l's language.
func jsonFormVM(l *i18n.Localizer) pages.JSONFormVM {
	return pages.JSONFormVM{Masked: redact.Placeholder, PolicySchema: policySchema(l)}
}

// policySchema describes the retry-policy override's fields (every field of retry.Spec) as
// JSON for the form.
func policySchema(l *i18n.Localizer) string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	var fields []policyField
	for _, b := range retry.Bounds() {
		min, max, def := b.Min, b.Max, b.Default
		f := policyField{Key: b.Field, Label: l.T("recovery.policy." + b.Field), Kind: "float", Min: &min, Max: &max, Step: 0.01}
		args := []any{"Min", num(b.Min), "Max", num(b.Max), "Default", num(b.Default)}
		if b.Integer {
			f.Kind, f.Step = "int", 0
		}
		switch {
		case b.Field == "customScheduleMs":
			f.Kind, f.Hint, f.Range = "list", l.T("recovery.policy.list.hint", args...), l.T("recovery.policy.range.int", args...)
		case b.ZeroAllowed:
			f.ZeroAllowed, f.Hint, f.Range = true, l.T("recovery.policy.range.hint.zero", args...), l.T("recovery.policy.range.zero", args...)
		default:
			f.Default, f.Hint, f.Range = &def, l.T("recovery.policy.range.hint", args...), l.T("recovery.policy.range", args...)
			if b.Integer {
				f.Range = l.T("recovery.policy.range.int", args...)
			}
		}
		if b.Field == "customScheduleMs" { // after the backoff type that needs it
			backoff := policyField{Key: "backoffType", Label: l.T("recovery.policy.backoffType"), Kind: "enum",
				DefaultLabel: l.T("recovery.policy.backoff.default")}
			for _, t := range retry.BackoffTypes() {
				backoff.Options = append(backoff.Options, policyOption{Value: string(t), Label: l.T("recovery.policy.backoff." + string(t))})
			}
			fields = append(fields, backoff)
		}
		fields = append(fields, f)
	}
	for _, key := range []string{"retryOnErrors", "noRetryOnErrors"} {
		f := policyField{Key: key, Label: l.T("recovery.policy." + key), Kind: "types", Hint: l.T("recovery.policy.types.hint")}
		for _, t := range classify.Types() {
			f.Options = append(f.Options, policyOption{Value: string(t), Label: l.TOr("errortype."+string(t), string(t))})
		}
		fields = append(fields, f)
	}
	out, _ := json.Marshal(fields)
	return string(out)
}
