package engine

import (
	"slices"
	"strconv"

	"lifeline/models"
	"lifeline/services/redact"
)

// searchText is what a search finds an execution by (models.SearchText): its subject and
// the values of in (its decoded input), in key order. The values under secret-looking keys
// are left out and the secret values m finds anywhere are masked, so a secret never becomes
// searchable text.
func (e *secrets) searchText(in any, subject *string, m *redact.Masker) string {
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
		case float64: // as JSON wrote it: a NIP typed as a number is found by its digits
			parts = append(parts, m.Mask(strconv.FormatFloat(x, 'f', -1, 64)))
		}
	}
	walk(in)
	return models.SearchText(parts...)
}
