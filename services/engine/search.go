package engine

import (
	"bytes"
	"encoding/json"
	"slices"

	"lifeline/models"
	"lifeline/services/definition"
)

// searchText is what a search finds an execution by (models.SearchText): its subject and
// the values of its input, in key order. The values under secret-looking keys are left out and
// secret values found anywhere are masked, so a secret never becomes searchable text.
func (e *secrets) searchText(def *definition.Definition, subject *string, input []byte) string {
	var in any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if dec.Decode(&in) != nil {
		return models.SearchText(deref(subject))
	}
	m := e.masker(def, in)
	parts := []string{deref(subject)}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if !e.redactor.Match(k) {
					walk(x[k])
				}
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		case string:
			parts = append(parts, m.Mask(x))
		case json.Number:
			parts = append(parts, m.Mask(string(x)))
		}
	}
	walk(in)
	return models.SearchText(parts...)
}
