package steps

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AskSchema is an input request's form.
type AskSchema struct {
	Fields []AskField `json:"fields"`
}

// AskField is one field of the form. Min and Max are numbers for number fields and decimal
// strings (or numbers) for amount fields.
type AskField struct {
	Name     string   `json:"name"`
	Label    string   `json:"label,omitempty"`
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Min      any      `json:"min,omitempty"`
	Max      any      `json:"max,omitempty"`
	Pattern  string   `json:"pattern,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// Field types of an input form.
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldAmount  = "amount"
	FieldDate    = "date"
	FieldEnum    = "enum"
	FieldBoolean = "boolean"
)

// FieldTypes lists them.
var FieldTypes = []string{FieldString, FieldNumber, FieldAmount, FieldDate, FieldEnum, FieldBoolean}

var decimalPattern = regexp.MustCompile(`^-?[0-9]{1,15}([.,][0-9]{1,2})?$`)

// ParseDecimal reads a decimal amount ("1234.5", "1234,50", "-3") as an exact rational.
func ParseDecimal(s string) (*big.Rat, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if !decimalPattern.MatchString(s) {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(strings.Replace(s, ",", ".", 1))
	return r, ok
}

// decimalOf reads an amount written as a decimal string or a JSON number.
func decimalOf(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case string:
		return ParseDecimal(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false
		}
		return ParseDecimal(strconv.FormatFloat(x, 'f', 2, 64))
	}
	return nil, false
}

// DecimalOf is decimalOf for callers outside the package (an onlyAbove amount as rendered).
func DecimalOf(v any) (*big.Rat, bool) { return decimalOf(v) }

// Check validates a form's values against the schema and returns them typed: numbers as
// numbers, amounts as decimal strings with two decimals ("1234.50"), dates "2026-11-25",
// booleans; a missing optional field is left out. Messages are keyed "values.<field>".
// Values may come as JSON (typed) or from a form (strings: "on"/"true" for a boolean).
func (s AskSchema) Check(values map[string]any) (map[string]any, map[string]string) {
	out := map[string]any{}
	errs := map[string]string{}
	for k := range values {
		if !slices.ContainsFunc(s.Fields, func(f AskField) bool { return f.Name == k }) {
			errs["values."+k] = "is not a field of this form"
		}
	}
	for _, f := range s.Fields {
		v, present := values[f.Name]
		if str, ok := v.(string); ok && strings.TrimSpace(str) == "" && f.Type != FieldBoolean {
			present = false
		}
		if !present || v == nil {
			if f.Type == FieldBoolean && !f.Required {
				out[f.Name] = false
				continue
			}
			if f.Required {
				errs["values."+f.Name] = "is required"
			}
			continue
		}
		typed, msg := f.check(v)
		if msg != "" {
			errs["values."+f.Name] = msg
			continue
		}
		out[f.Name] = typed
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func (f AskField) check(v any) (any, string) {
	switch f.Type {
	case FieldString:
		s, ok := v.(string)
		if !ok {
			return nil, "must be text"
		}
		if len(s) > 5000 {
			return nil, "must be at most 5000 characters"
		}
		if f.Pattern != "" {
			if re, err := regexp.Compile(f.Pattern); err == nil && !re.MatchString(s) {
				return nil, "does not have the expected form (" + f.Pattern + ")"
			}
		}
		return s, ""
	case FieldNumber:
		var n float64
		ok := true
		switch x := v.(type) {
		case float64:
			n = x
		case int:
			n = float64(x)
		case int64:
			n = float64(x)
		case string:
			var err error
			n, err = strconv.ParseFloat(strings.Replace(strings.TrimSpace(x), ",", ".", 1), 64)
			ok = err == nil
		default:
			ok = false
		}
		if !ok || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, "must be a number"
		}
		if lo, ok := f.Min.(float64); ok && n < lo {
			return nil, fmt.Sprintf("must be at least %v", lo)
		}
		if hi, ok := f.Max.(float64); ok && n > hi {
			return nil, fmt.Sprintf("must be at most %v", hi)
		}
		return n, ""
	case FieldAmount:
		r, ok := decimalOf(v)
		if !ok {
			return nil, `must be an amount with at most two decimals, e.g. "1234.50"`
		}
		if lo, ok := decimalOf(f.Min); ok && r.Cmp(lo) < 0 {
			return nil, "must be at least " + lo.FloatString(2)
		}
		if hi, ok := decimalOf(f.Max); ok && r.Cmp(hi) > 0 {
			return nil, "must be at most " + hi.FloatString(2)
		}
		return r.FloatString(2), ""
	case FieldDate:
		s, _ := v.(string)
		d, err := time.Parse("2006-01-02", strings.TrimSpace(s))
		if err != nil {
			return nil, "must be a date (YYYY-MM-DD)"
		}
		return d.Format("2006-01-02"), ""
	case FieldEnum:
		s, _ := v.(string)
		if !slices.Contains(f.Options, s) {
			return nil, "must be one of " + strings.Join(f.Options, ", ")
		}
		return s, ""
	case FieldBoolean:
		switch x := v.(type) {
		case bool:
			return x, ""
		case string:
			switch strings.ToLower(strings.TrimSpace(x)) {
			case "true", "on", "1", "yes":
				return true, ""
			case "false", "off", "0", "no", "":
				return false, ""
			}
		}
		return nil, "must be true or false"
	}
	return nil, "has an unknown type"
}
